"""The claims: ``registry`` (a claim and its readings), ``kinds`` (one row per
claim kind), ``statistics`` (each kind's check, one comparison at a time),
``tables`` (the claims and readings tables) and ``lines`` (each claim's line
from its tables).
"""
