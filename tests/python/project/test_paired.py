"""The overhead benchmarks' verdict (benchmarks/paired.py): met or missed only when the middle half
of the rounds is on one side of the target, with quartiles taken within the rounds seen."""

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from paired import verdict  # noqa: E402


def test_every_round_over_the_target_is_missed_even_with_two_rounds():
    # The H100's 1.5 ms loop on 2026-11-28: both rounds over 2%. The exclusive quartiles read a
    # lower quartile of +1.35% and called it "not measurable".
    assert verdict([1.0218, 1.0549], 1.02) == "missed"


def test_rounds_on_both_sides_of_the_target_are_not_measurable():
    assert verdict([1.0081, 0.9988], 1.005) == "not measurable here"


def test_every_round_under_the_target_is_met():
    assert verdict([1.001, 1.004, 1.002, 1.003], 1.005) == "met"


def test_one_outlying_round_of_many_does_not_decide():
    assert verdict([1.001, 1.002, 1.001, 1.003, 1.002, 1.002, 1.09], 1.005) == "met"
