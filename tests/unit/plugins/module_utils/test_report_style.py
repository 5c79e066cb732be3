"""How the run's page and the controller's job tables write durations
(module_utils/report_style.py format_duration, the one both use)."""

import pytest

from ansible_collections.fuzz.multinode.plugins.module_utils.report_style import format_duration


@pytest.mark.parametrize("seconds, text", [
    (0, "0.0 s"), (4.25, "4.2 s"), (59.94, "59.9 s"), (60, "1m00s"), (90, "1m30s"),
    (3599, "59m59s"), (3600, "1h00m00s"), (7384, "2h03m04s"), (None, "")])
def test_durations_read_as_a_user_writes_them(seconds, text):
    assert format_duration(seconds) == text
