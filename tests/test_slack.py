"""pymap.slack: the filter's measured threshold allowance, and its cache."""
import pytest

from pymap import api, slack


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path


def test_measured_once_then_taken_from_the_cache(cache_home, capsys, monkeypatch):
    filt = api.make_filter("gatekeeper-gpu", {"device": "cpu"})
    table = slack.SlackTable(filt)
    values = {(L, e): table.slack(L, e) for L, e in ((100, 4), (150, 6), (37, 1))}
    assert values[(37, 1)] == 1 and all(0 <= k <= e for (_, e), k in values.items())
    assert capsys.readouterr().err.count("measuring filter 'gatekeeper-gpu'") == 1    # said once
    table.save()
    # another run, on the other device: the same cache entry (decisions do not depend on it)
    again = slack.SlackTable(api.make_filter("gatekeeper-gpu", {"device": "auto"}))
    monkeypatch.setattr(again, "_measure", lambda *key: pytest.fail(f"measured {key} again"))
    assert {key: again.slack(*key) for key in values} == values
    assert "measuring" not in capsys.readouterr().err
