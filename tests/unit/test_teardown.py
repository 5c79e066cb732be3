"""Unit tests of the head's side of the teardown over the job's holds
(teardown.ask_over_holds): which nodes answered, which are to be asked
afresh, which gave no answer in time. Each node's end of its channel is a
real serve_channel in a child process; the whole teardown runs on real
clusters in the Molecule scenarios."""

import json
import os
import time

from multinode_runtime import channel, teardown, wire


class PipeHold:
    """A transport whose hold is a child serving a channel with `answer`
    as its teardown (None: the child ends at the teardown request without
    answering; "silent": it never answers)."""

    def __init__(self, answer):
        into_r, self.into = os.pipe()
        self.out, out_w = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            os.close(self.into)
            os.close(self.out)
            if answer == "silent":
                time.sleep(30)
            elif answer is not None:
                channel.serve_channel(channel.ForkedCalls(lambda request: 0), into_r, out_w,
                                      lambda request: [(wire.FRAME_STDOUT, json.dumps(answer).encode()),
                                                       (wire.FRAME_EXIT, b"0")])
            os._exit(0)
        os.close(into_r)
        os.close(out_w)

    def send_teardown(self, request):
        channel.send_tagged(self.into, 0, channel.TEARDOWN, json.dumps(request).encode())
        return self.out

    def end(self):
        os.close(self.into)
        os.close(self.out)
        os.kill(self.pid, 9)
        os.waitpid(self.pid, 0)


class GoneHold:
    def send_teardown(self, request):
        return None


def test_the_holds_answer_and_the_others_are_told_apart():
    holds = {"n2": PipeHold({"records": [{"rank": 1}], "logs": []}),
             "n3": PipeHold(None), "n4": PipeHold("silent")}
    transports = dict(holds, n5=GoneHold())
    started = time.monotonic()
    try:
        answers, gone = teardown.ask_over_holds(transports, {"cleanup": True}, time.monotonic() + 1.5)
    finally:
        for hold in holds.values():
            hold.end()
    assert answers == {"n2": {"records": [{"rank": 1}], "logs": []}}
    # n3's hold ended without an answer and n5's is gone: asked afresh;
    # n4 answered nothing in time: a fresh connection would time out too.
    assert gone == {"n3", "n5"}
    assert time.monotonic() - started < 5


def test_an_answer_is_what_its_first_output_frame_says():
    assert teardown.answer_in([(wire.FRAME_STDERR, b"x"), (wire.FRAME_STDOUT, b"not json"),
                               (wire.FRAME_STDOUT, b"[1]"), (wire.FRAME_EXIT, b"0")]) == [1]
    assert teardown.answer_in([(wire.FRAME_ERROR, b"no"), (wire.FRAME_EXIT, b"255")]) is None
