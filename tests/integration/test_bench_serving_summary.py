"""benchmarks/bench_serving.py's summary: one round shows each ratio as measured; several
show the median over the rounds with its range, so a reader sees how far runs moved."""
import sys

from server_harness import REPO

sys.path.insert(0, str(REPO / "benchmarks"))
from bench_serving import print_summary, summary_cell  # noqa: E402


def test_one_round_shows_the_ratio_as_measured():
    assert summary_cell([0.8449], percent=True) == "84 %"
    assert summary_cell([1.234], percent=False) == "1.23x"


def test_several_rounds_show_the_median_and_the_range():
    assert summary_cell([0.91, 0.78, 0.86], percent=True) == "86 % (78 % - 91 %)"
    # An even count: the median is the mean of the middle two.
    assert summary_cell([1.0, 2.0, 1.2, 1.4], percent=False) == "1.30x (1.00x - 2.00x)"


def test_the_summary_has_a_row_per_model_with_every_ratio(capsys):
    rounds = [{"unbatched": 0.80, "dynamic": 0.90, "dynamic_any": 0.70, "p99_c1": 1.1},
              {"unbatched": 0.84, "dynamic": 0.86, "dynamic_any": 0.72, "p99_c1": 1.5}]
    print_summary([("vit_fmnist", rounds)], 2)
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("| model, median (range) of 2 rounds |")
    assert lines[-1] == ("| vit_fmnist | 82 % (80 % - 84 %) | 88 % (86 % - 90 %) | "
                         "71 % (70 % - 72 %) | 1.30x (1.10x - 1.50x) |")
