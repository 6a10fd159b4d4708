"""pymap.slack: the filter's measured threshold allowance, and its cache."""
import edlib
import numpy as np
import pytest

from pymap import api, slack
from pymap.kernels.worst_cases import REPS, worst_case_pairs


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_measured_once_then_taken_from_the_cache(cache_home, capsys, monkeypatch):
    filt = api.make_filter("gatekeeper-gpu", {"device": "cpu"})
    table = slack.SlackTable(filt)
    values = {(L, e): table.slack(L, e) for L, e in ((100, 4), (150, 6), (37, 1))}
    assert values[(37, 1)] == 1 and all(0 <= k <= e for (_, e), k in values.items())
    assert capsys.readouterr().err.count("allowance of filter 'gatekeeper-gpu'") == 1    # said once
    table.save()
    # another run, on the other device: the same cache entry (decisions do not depend on it)
    again = slack.SlackTable(api.make_filter("gatekeeper-gpu", {"device": "auto"}))
    monkeypatch.setattr(again, "_measure", lambda *key: pytest.fail(f"measured {key} again"))
    assert {key: again.slack(*key) for key in values} == values
    assert "measuring" not in capsys.readouterr().err


@pytest.mark.parametrize("length, e", [(30, 3), (37, 4), (100, 10), (150, 15), (251, 25)])
def test_worst_cases(length, e):
    """Per (L, e) the same set every time: each read paired with the segments at its alignment's first
    and last diagonal, at most 2e edits from either (one per indel base more than e), and pairs that
    need more than e among them (what the allowance is for)."""
    reads, refs = worst_case_pairs(length, e)
    again = worst_case_pairs(length, e)
    assert np.array_equal(reads, again[0]) and np.array_equal(refs, again[1])
    assert reads.shape == refs.shape == (e * 3 * 3 * REPS * 2, length)
    assert set(np.unique(reads).tolist()) | set(np.unique(refs).tolist()) <= set(b"ACGT")
    dist = np.array([edlib.align(a.tobytes(), b.tobytes(), mode="NW")["editDistance"] for a, b in zip(reads, refs)])
    assert dist.max() <= 2 * e and (dist > e).mean() > 0.2
    assert worst_case_pairs(length, 0)[0].shape == (0, length) and worst_case_pairs(4 * e + 7, e)[0].shape[0] == 0
