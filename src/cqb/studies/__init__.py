"""The studies the config asks for, on the plan's runs: ``claim_specs`` (the
claims, the tuning set-up and the seed-use checks), ``confirmatory``,
``replication``, ``multiverse_plan`` (Figure 8's design) and ``candidates``
(the candidate-policy benchmark). Their statistics are :mod:`cqb.analysis`'s.
"""
