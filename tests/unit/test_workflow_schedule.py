"""The workflow runner's plan (plugins/plugin_utils/workflow_schedule.py):
which jobs start when, on which hosts, and which are not run. Pure logic;
the runner itself is checked in tests/local/test_local_parallel.py and
molecule/workflow."""

from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.fuzz.multinode.plugins.plugin_utils.workflow_schedule import (
    FINISHED,
    NOT_RUN,
    RUNNING,
    WAITING,
    Schedule,
    can_overlap,
)

HOSTS = ["h1", "h2", "h3", "h4"]


def job(name, needs=1, after=(), pinned=False):
    return {"name": name, "needs": needs, "depends_on": list(after), "pinned": pinned}


FAN_OUT = [job("a"), job("b"), job("c"), job("d")]
DIAMOND = [job("first"), job("left", after=["first"]), job("middle", after=["first"]),
           job("right", after=["first"]), job("last", after=["left", "middle", "right"])]


def test_independent_jobs_start_at_once_each_on_its_own_host_in_inventory_order():
    plan = Schedule(FAN_OUT, HOSTS)
    assert plan.next_jobs() == [("a", ["h1"]), ("b", ["h2"]), ("c", ["h3"]), ("d", ["h4"])]
    assert plan.next_jobs() == []
    assert plan.running == ["a", "b", "c", "d"]


def test_a_job_with_devices_runs_only_on_the_hosts_that_have_them_and_waits_for_those():
    gpu = dict(job("gpu", needs=2), hosts=["h2", "h4"])
    plan = Schedule([job("a"), job("b"), gpu, job("c")], HOSTS)
    assert plan.next_jobs() == [("a", ["h1"]), ("b", ["h2"]), ("c", ["h3"])]
    plan.ended("a", FINISHED)
    assert plan.next_jobs() == []  # h1 is free, but has no devices
    plan.ended("b", FINISHED)
    assert plan.next_jobs() == [("gpu", ["h2", "h4"])]


def test_a_job_with_devices_on_too_few_hosts_is_not_run_naming_them():
    plan = Schedule([dict(job("gpu", needs=2), hosts=["h3"]), job("after", after=["gpu"])], HOSTS)
    assert plan.status == {"gpu": NOT_RUN, "after": NOT_RUN}
    assert plan.messages["gpu"] == "job gpu not run: it needs 2 hosts with its devices and the play has 1 (h3)"


def test_jobs_that_do_not_fit_wait_for_hosts_and_take_the_freed_ones():
    plan = Schedule(FAN_OUT, HOSTS[:2])
    assert plan.next_jobs() == [("a", ["h1"]), ("b", ["h2"])]
    assert plan.ended("b", FINISHED) == []
    assert plan.next_jobs() == [("c", ["h2"])]
    plan.ended("a", FINISHED)
    assert plan.next_jobs() == [("d", ["h1"])]
    plan.ended("c", FINISHED)
    plan.ended("d", FINISHED)
    assert plan.done and plan.next_jobs() == []


def test_a_diamond_runs_its_middle_at_once_and_its_end_after_all_of_it():
    plan = Schedule(DIAMOND, HOSTS)
    assert plan.next_jobs() == [("first", ["h1"])]
    plan.ended("first", FINISHED)
    assert plan.next_jobs() == [("left", ["h1"]), ("middle", ["h2"]), ("right", ["h3"])]
    plan.ended("middle", FINISHED)
    plan.ended("left", FINISHED)
    assert plan.next_jobs() == []  # right still runs
    plan.ended("right", FINISHED)
    assert plan.next_jobs() == [("last", ["h1"])]


def test_a_multinode_job_gets_the_first_free_hosts_rank_0_first():
    plan = Schedule([job("small"), job("wide", needs=3)], HOSTS)
    assert plan.next_jobs() == [("small", ["h1"]), ("wide", ["h2", "h3", "h4"])]


def test_a_job_waiting_for_hosts_does_not_hold_back_a_later_one_that_fits():
    plan = Schedule([job("one"), job("wide", needs=4), job("other")], HOSTS)
    assert plan.next_jobs() == [("one", ["h1"]), ("other", ["h2"])]
    plan.ended("one", FINISHED)
    assert plan.next_jobs() == []
    plan.ended("other", FINISHED)
    assert plan.next_jobs() == [("wide", HOSTS)]


def test_at_once_limits_the_jobs_running_and_1_runs_them_one_at_a_time_in_order():
    plan = Schedule(FAN_OUT, HOSTS, at_once=2)
    assert [name for name, _unused in plan.next_jobs()] == ["a", "b"]
    plan.ended("a", FINISHED)
    assert [name for name, _unused in plan.next_jobs()] == ["c"]
    plan = Schedule(FAN_OUT, HOSTS, at_once=1)
    order = []
    while not plan.done:
        ((name, hosts),) = plan.next_jobs()
        assert hosts == ["h1"]
        order.append(name)
        plan.ended(name, FINISHED)
    assert order == ["a", "b", "c", "d"]


def test_shared_hosts_take_every_ready_job_on_the_least_busy_hosts():
    plan = Schedule(FAN_OUT + [job("wide", needs=3)], HOSTS[:3], share_hosts=True)
    assert plan.next_jobs() == [("a", ["h1"]), ("b", ["h2"]), ("c", ["h3"]), ("d", ["h1"]),
                                ("wide", ["h1", "h2", "h3"])]
    assert plan.load == {"h1": 3, "h2": 2, "h3": 2}


def test_local_mode_one_host_shared_runs_every_ready_job_there():
    plan = Schedule(FAN_OUT, ["localhost"], share_hosts=True)
    assert plan.next_jobs() == [(name, ["localhost"]) for name in "abcd"]


def test_a_failed_job_leaves_its_dependants_not_run_naming_it_and_other_branches_go_on():
    jobs = [job("start"), job("left", after=["start"]), job("right", after=["start"]),
            job("join", after=["left", "right"]), job("after-join", after=["join"]),
            job("after-right", after=["right"]), job("lone")]
    plan = Schedule(jobs, HOSTS[:3])
    assert plan.next_jobs() == [("start", ["h1"]), ("lone", ["h2"])]
    plan.ended("start", FINISHED)
    assert plan.next_jobs() == [("left", ["h1"]), ("right", ["h3"])]
    assert plan.ended("left", "FAILED") == ["join", "after-join"]
    assert plan.messages == {
        "join": "job join not run: it depends on left, which did not finish",
        "after-join": "job after-join not run: it depends on join, which did not finish"}
    plan.ended("right", FINISHED)
    assert plan.next_jobs() == [("after-right", ["h1"])]
    plan.ended("after-right", FINISHED)
    plan.ended("lone", "CANCELED")
    assert plan.done
    assert plan.status == {"start": FINISHED, "left": "FAILED", "right": FINISHED, "join": NOT_RUN,
                           "after-join": NOT_RUN, "after-right": FINISHED, "lone": "CANCELED"}


def test_a_pinned_job_takes_the_first_hosts_and_waits_for_them():
    plan = Schedule([job("free"), job("data", needs=2, pinned=True), job("more")], HOSTS)
    assert plan.next_jobs() == [("free", ["h1"]), ("more", ["h2"])]
    plan.ended("free", FINISHED)
    assert plan.next_jobs() == []  # h2 is busy
    plan.ended("more", FINISHED)
    assert plan.next_jobs() == [("data", ["h1", "h2"])]
    plan = Schedule([job("a", pinned=True), job("b", pinned=True)], HOSTS, share_hosts=True)
    assert plan.next_jobs() == [("a", ["h1"]), ("b", ["h1"])]


def test_a_job_larger_than_the_play_is_not_run_nor_are_its_dependants():
    plan = Schedule([job("huge", needs=5), job("after", after=["huge"]), job("small")], HOSTS)
    assert plan.status == {"huge": NOT_RUN, "after": NOT_RUN, "small": WAITING}
    assert plan.messages["huge"] == "job huge not run: it needs 5 hosts and the play has 4 (h1, h2, h3, h4)"
    assert plan.messages["after"] == "job after not run: it depends on huge, which did not finish"
    assert plan.next_jobs() == [("small", ["h1"])]


def test_stop_leaves_the_running_jobs_and_marks_the_waiting_ones_not_run():
    plan = Schedule(DIAMOND, HOSTS)
    plan.next_jobs()
    assert plan.stop("the run was interrupted") == ["left", "middle", "right", "last"]
    assert plan.status["first"] == RUNNING and not plan.done
    assert plan.messages["last"] == "job last not run: the run was interrupted"
    plan.ended("first", "CANCELED")
    assert plan.done and plan.next_jobs() == []


def test_dependencies_outside_the_run_are_ignored():
    plan = Schedule([job("report", after=["left", "right"])], HOSTS)
    assert plan.next_jobs() == [("report", ["h1"])]


def test_jobs_can_overlap_only_when_independent_and_fitting_together():
    assert can_overlap(FAN_OUT, 2)
    assert can_overlap(DIAMOND, 2)
    chain = [job("a"), job("b", after=["a"]), job("c", after=["b"])]
    assert not can_overlap(chain, 4)
    # a -> b -> c, and a -> c: still a chain
    assert not can_overlap(chain[:2] + [job("c", after=["b", "a"])], 4)
    assert not can_overlap([job("a", needs=3), job("b", needs=2)], 4)
    assert can_overlap([job("a", needs=3), job("b", needs=2)], 4, share_hosts=True)
    assert not can_overlap([job("a", pinned=True), job("b", pinned=True)], 4)
    assert can_overlap([job("a", pinned=True), job("b")], 4)
    assert not can_overlap([job("only")], 4)


@st.composite
def workflows(draw):
    """A random DAG of up to 8 jobs (each depends on some earlier ones),
    2 to 5 hosts, a random at_once and sharing, and the order in which
    the running jobs end and with what status."""
    hosts = ["h%d" % index for index in range(draw(st.integers(2, 5)))]
    jobs = []
    for index in range(draw(st.integers(1, 8))):
        earlier = [other["name"] for other in jobs]
        jobs.append(job("j%d" % index, needs=draw(st.integers(1, len(hosts))),
                        after=draw(st.lists(st.sampled_from(earlier), unique=True)) if earlier else [],
                        pinned=draw(st.booleans())))
    return jobs, hosts, draw(st.integers(0, 3)), draw(st.booleans()), draw(st.randoms())


@settings(max_examples=300, deadline=None)
@given(workflows())
def test_every_run_respects_dependencies_hosts_and_limits_and_ends(case):
    jobs, hosts, at_once, share, chance = case
    plan = Schedule(jobs, hosts, at_once=at_once, share_hosts=share)
    finished, steps = set(), 0
    while not plan.done:
        steps += 1
        assert steps < 100
        for name, placed in plan.next_jobs():
            spec = plan.jobs[name]
            assert all(dep in finished for dep in spec["depends_on"]), name
            assert len(placed) == spec["needs"] == len(set(placed)) and placed == sorted(placed, key=hosts.index)
            if spec["pinned"]:
                assert placed == hosts[:spec["needs"]]
        running = plan.running
        assert running, "nothing runs, yet jobs wait: %r" % plan.status
        assert not at_once or len(running) <= at_once
        if not share:
            used = [host for name in running for host in plan.placed[name]]
            assert len(used) == len(set(used)), plan.placed
        name = chance.choice(running)
        status = chance.choice([FINISHED, FINISHED, "FAILED"])
        plan.ended(name, status)
        if status == FINISHED:
            finished.add(name)
    for name, spec in plan.jobs.items():
        deps_finished = all(plan.status[dep] == FINISHED for dep in spec["depends_on"])
        assert (plan.status[name] == NOT_RUN) == (not deps_finished), (name, plan.status)


# -- services ---------------------------------------------------------------------


def service(name, needs=1, after=(), running=(), persist=False):
    return {"name": name, "needs": needs, "depends_on": list(after), "running_deps": list(running),
            "service": True, "persist": persist}


def client(name, running=(), after=(), needs=1):
    return {"name": name, "needs": needs, "depends_on": list(after), "running_deps": list(running)}


def test_a_job_that_needs_a_service_running_starts_once_it_is_ready_and_then_the_service_stops():
    plan = Schedule([service("api"), client("reader", running=["api"])], HOSTS)
    assert plan.next_jobs() == [("api", ["h1"])]
    assert plan.next_jobs() == [] and plan.to_stop() == []  # started, not ready yet
    plan.is_ready("api")
    # A host without a service first.
    assert plan.next_jobs() == [("reader", ["h2"])]
    assert plan.to_stop() == []  # its dependant runs
    plan.ended("reader", FINISHED)
    assert plan.to_stop() == [("api", "every job that needs it running has ended")]
    assert plan.to_stop() == []  # told once
    plan.ended("api", FINISHED)
    assert plan.done


def test_a_service_holds_no_host_for_itself_on_a_small_inventory():
    plan = Schedule([service("api"), client("reader", running=["api"])], ["h1"])
    assert plan.next_jobs() == [("api", ["h1"])]
    plan.is_ready("api")
    assert plan.next_jobs() == [("reader", ["h1"])]


def test_a_service_that_ends_before_it_is_ready_leaves_its_dependants_not_run_saying_why():
    plan = Schedule([service("api"), client("reader", running=["api"]), client("after", after=["reader"])], HOSTS)
    plan.next_jobs()
    blocked = plan.ended("api", "FAILED", "service api did not become ready within 5 s: its readiness-probe "
                                          "http-get http://10.0.0.1:8080/: connection refused")
    assert blocked == ["reader", "after"]
    assert plan.messages["reader"] == (
        "job reader not run: it needs service api RUNNING, which ended (FAILED before it was ready): service api "
        "did not become ready within 5 s: its readiness-probe http-get http://10.0.0.1:8080/: connection refused")
    assert plan.messages["after"] == "job after not run: it depends on reader, which did not finish"
    assert plan.done


def test_a_persistent_service_and_one_nobody_needs_running_stop_when_the_jobs_are_over():
    plan = Schedule([service("db", persist=True), service("cache"), client("load", running=["db"]),
                     client("report", after=["load"])], HOSTS)
    assert plan.next_jobs() == [("db", ["h1"]), ("cache", ["h2"])]
    plan.is_ready("db")
    assert plan.next_jobs() == [("load", ["h3"])]
    plan.ended("load", FINISHED)
    assert plan.to_stop() == []  # persistent; report can start
    assert plan.next_jobs() == [("report", ["h3"])]
    assert plan.to_stop() == []
    plan.ended("report", FINISHED)
    assert plan.to_stop() == [("db", "the workflow's jobs are over"), ("cache", "the workflow's jobs are over")]


def test_the_jobs_are_not_over_while_one_waits_for_a_service_to_become_ready():
    plan = Schedule([service("slow"), client("early"), client("late", running=["slow"])], HOSTS)
    assert plan.next_jobs() == [("slow", ["h1"]), ("early", ["h2"])]
    plan.ended("early", FINISHED)
    assert plan.to_stop() == []  # late still waits for slow
    plan.is_ready("slow")
    assert plan.next_jobs() == [("late", ["h2"])]


def test_a_workflow_of_services_only_keeps_them_running():
    plan = Schedule([service("notebook", persist=True), service("web")], HOSTS)
    assert plan.next_jobs() == [("notebook", ["h1"]), ("web", ["h2"])]
    plan.is_ready("notebook")
    plan.is_ready("web")
    assert plan.to_stop() == []
    assert not plan.done


def test_a_job_that_needs_a_service_finished_starts_after_the_services_are_stopped():
    plan = Schedule([service("api"), client("use", running=["api"]), client("after", after=["api"])], HOSTS)
    plan.next_jobs()
    plan.is_ready("api")
    assert plan.next_jobs() == [("use", ["h2"])]
    plan.ended("use", FINISHED)
    assert plan.to_stop() == [("api", "every job that needs it running has ended")]
    plan.ended("api", FINISHED)  # the runner stopped it: it did its part
    assert plan.next_jobs() == [("after", ["h1"])]


def test_services_do_not_count_towards_the_jobs_at_once():
    plan = Schedule([service("api"), client("a", running=["api"]), client("b", running=["api"])], HOSTS,
                    at_once=1)
    assert plan.next_jobs() == [("api", ["h1"])]
    plan.is_ready("api")
    assert plan.next_jobs() == [("a", ["h2"])]
    plan.ended("a", FINISHED)
    assert plan.next_jobs() == [("b", ["h2"])]
