"""cqb.analysis.formatting: one way to print a number, an interval and a missing value."""

import math

import numpy as np
import pytest

from cqb.analysis.formatting import format_interval, format_number, format_value


def test_an_interval_prints_value_and_bounds_to_three_digits():
    assert format_interval(0.76812, 0.42611, 1.1499) == "0.768 [0.426, 1.15]"
    assert format_interval(np.float64(26.2), 11.6, 43.0) == "26.2 [11.6, 43]"
    assert format_interval(2, 1, 3, digits=4) == "2 [1, 3]"


@pytest.mark.parametrize("missing_value", [math.nan, None, math.inf, -math.inf, np.nan, "n/a"])
def test_a_missing_value_prints_as_missing_and_a_missing_interval_as_the_value_alone(missing_value):
    assert format_interval(missing_value, 0.1, 0.2) == "–"
    assert format_interval(missing_value, 0.1, 0.2, missing="") == ""
    assert format_interval(0.5, missing_value, missing_value) == "0.5"
    assert format_number(missing_value) == "–" and format_number(missing_value, 4, missing="") == ""


def test_numbers_and_sweep_values():
    assert format_number(1234567) == "1.23e+06" and format_number(0.000123456, 4) == "0.0001235"
    assert format_value(0.7) == "0.7" and format_value(5.0) == "5" and format_value(True) == "True"
    assert format_value("1e3") == "1e3"
