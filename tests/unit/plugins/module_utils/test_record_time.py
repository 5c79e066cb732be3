"""The run record's time stamps: what run_record writes, the report and the
record's own readers read back as the same instant."""

from ansible_collections.fuzz.multinode.plugins.module_utils.record_time import seconds_of, utc, utc_precise

WHEN = 1796690730.5678  # 2026-12-08T00:45:30.567Z


def test_a_run_s_and_a_job_s_stamp_reads_back_to_the_second():
    assert utc(WHEN) == "2026-12-08T00:45:30Z"
    assert seconds_of(utc(WHEN)) == 1796690730.0


def test_a_rank_s_stamp_reads_back_to_the_millisecond():
    assert utc_precise(WHEN) == "2026-12-08T00:45:30.567Z"
    assert abs(seconds_of(utc_precise(WHEN)) - 1796690730.567) < 1e-6


def test_anything_else_is_no_time():
    for stamp in (None, "", "-", "2026-12-08 00:45:30", "2026-12-08T00:45:30", 1796690730, ["2026-12-08T00:45:30Z"]):
        assert seconds_of(stamp) is None, stamp
