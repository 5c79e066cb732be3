# Copyright: fuzz.multinode developers
# Apache License 2.0 (see LICENSE)
"""Action plugin of fuzz.multinode.volume_transfers: a run's ingress (or
egress) items that belong to this host, one at a time, each one node
runtime command over the host's connection (`transfer`, the item's
credentials on stdin), its progress shown as `[ingress] ...` lines; a
file:// egress destination is copied to the controller a piece at a time
(`volume-read`).

Which items are this host's (`items_here`): ingress, those of each volume
that a job on this host mounts (left to the first host when the volume
root is shared storage: said by the play, or else found by the host's
runtime); egress, every item, on the first
host only (it runs rank 0 of every job, so it has every volume)."""

from __future__ import annotations

import base64
import json
import os
import tempfile
import threading
import time

from ansible.errors import AnsibleError
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import FuzzfileError, volume_relative_path
from ansible_collections.fuzz.multinode.plugins.module_utils.node_runtime import (
    PREFIX,
    VOLUME_TRANSFERS_ARGUMENT_SPEC,
    RuntimeRefused,
    runtime_answer,
    runtime_command,
)
from ansible_collections.fuzz.multinode.plugins.module_utils.report_style import format_duration
from ansible_collections.fuzz.multinode.plugins.plugin_utils.job_report import shown_on_terminal

display = Display()

PIECE = 4 << 20  # bytes of a volume's file per volume-read


def items_here(transfers, direction, hosts, host, sharing="auto"):
    """[(volume entry, item)] of `transfers` (the fuzzfile task's) that
    `host` carries out, in order; whether it is the first host; and the
    volumes whose ingress it leaves to the first host because the play
    says the volume root is shared storage (with `auto` only the host's
    runtime can tell, so it is asked)."""
    if host not in hosts:
        return [], False, []
    index = hosts.index(host)
    chosen, left = [], []
    for volume in transfers:
        if direction == "ingress" and index < volume.get("hosts", 1):
            if index > 0 and sharing == "shared":
                left += [volume["volume"]] if volume.get("ingress") else []
            else:
                chosen += [(volume, item) for item in volume.get("ingress", [])]
        elif direction == "egress" and index == 0:
            chosen += [(volume, item) for item in volume.get("egress", [])]
    return chosen, index == 0, left


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _unused, params = self.validate_argument_spec(argument_spec=VOLUME_TRANSFERS_ARGUMENT_SPEC)
        host = (task_vars or {}).get("inventory_hostname", "")
        direction = params["direction"]
        chosen, first, left_to_first = items_here(params["transfers"], direction, params["hosts"], host,
                                                  params["volume_sharing"])
        for name in left_to_first:  # as the runtime says it where it had to look (sharing auto)
            display.display("[ingress] volume %s: the volume root is shared storage: the first host copies it" % name)
        copied, failures, left = [], [], set()
        for volume, item in chosen:
            if volume["volume"] in left:
                continue
            label = "[%s] %s" % (direction, item["field"])
            display.display(shown_on_terminal("%s: %s -> %s on %s" % (label, item["source"], item["destination"],
                                                                      host)))
            try:
                if direction == "egress" and item["destination"].startswith("file://"):
                    answer = self._fetch(params, volume, item, label)
                else:
                    answer = self._transfer(params, volume, item, first, label)
            except (RuntimeRefused, FuzzfileError, OSError, AnsibleError) as exc:
                failures.append("%s (on %s)" % (exc, host))
                display.display(shown_on_terminal("%s: failed: %s" % (label, exc)))
                if direction == "ingress":
                    break  # no job will run: nothing more to copy in
                continue
            if answer.get("skipped"):
                display.display("[%s] volume %s: %s" % (direction, volume["volume"], answer["skipped"]))
                left.add(volume["volume"])
                continue
            copied.append(dict(field=item["field"], bytes=answer.get("bytes"), seconds=answer.get("seconds")))
            display.display("%s: done, %s in %s" % (label, _size(answer.get("bytes") or 0),
                                                    format_duration(answer.get("seconds") or 0)))
        result.update(changed=bool(copied), copied=copied, failures=failures)
        if failures:
            result.update(failed=True, msg="%s failed: %s" % (direction, "; ".join(failures)))
        return result

    def _transfer(self, params, volume, item, first, label):
        """One item by the node's runtime (`transfer`); its answer. The
        secret's value goes on stdin, only the one the item names."""
        request = dict(
            run=params["run"], volume_root=params["volume_root"], sharing=params["volume_sharing"],
            first=first, user=params["user"], volume=volume["volume"], store=volume["store"],
            direction=params["direction"], item=item, s3_endpoint_url=params["s3_endpoint_url"] or None,
            credentials=params["secrets"].get(item["secret"]) if item.get("secret") else None,
        )
        source = item["source"]
        if params["direction"] == "ingress" and source.startswith("file://"):
            name = source[len("file://"):]
            if name not in params["files"]:
                raise RuntimeRefused("%s: %s names no entry of the workflow's files" % (item["field"], source))
            request["contents"] = params["files"][name]
        done = self._while_showing(label, params["progress_every"], lambda: self._low_level_execute_command(
            runtime_command("transfer"), sudoable=True, in_data=json.dumps(request).encode()))
        for line in (done.get("stdout") or "").splitlines():
            if line and not line.startswith("{") and not line.startswith(PREFIX):
                display.display(shown_on_terminal("[%s] %s" % (params["direction"], line)))
        return runtime_answer(done.get("rc"), done.get("stdout", ""), done.get("stderr", ""), "transfer")

    def _while_showing(self, label, every, work):
        """work() in a thread of its own while this one says, every `every`
        seconds, that the item is still being copied (a node's progress
        lines come with its answer)."""
        outcome = {}

        def call():
            try:
                outcome["done"] = work()
            except BaseException as exc:  # noqa: BLE001 - raised again below, in this thread
                outcome["error"] = exc

        worker = threading.Thread(target=call, daemon=True)
        started = time.monotonic()
        worker.start()
        while worker.is_alive():
            worker.join(every if every > 0 else None)
            if worker.is_alive():
                display.display("%s: still copying, %s" % (label, format_duration(time.monotonic() - started)))
        if "error" in outcome:
            raise outcome["error"]
        return outcome["done"]

    def _fetch(self, params, volume, item, label):
        """An egress item to file://PATH: the file of the volume, read on
        the first host as the job user a piece at a time, written under a
        temporary name beside `egress_dir`/PATH and renamed over it once
        whole (a failure leaves nothing)."""
        if not params["egress_dir"]:
            raise RuntimeRefused("%s: %s: no egress directory on the controller (egress_dir)"
                                 % (item["field"], item["destination"]))
        try:
            return self._fetch_into(params, volume, item, label)
        except OSError as exc:
            raise RuntimeRefused("%s: %s -> %s: on the controller: %s" % (
                item["field"], item["source"], item["destination"], exc)) from None

    def _fetch_into(self, params, volume, item, label):
        inside = volume_relative_path(item["source"], item["field"] + ".source")
        path = os.path.join(params["egress_dir"], volume_relative_path(
            item["destination"], item["field"] + ".destination", "the controller's egress directory"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        handle = tempfile.NamedTemporaryFile(dir=os.path.dirname(path), prefix=".%s.fuzz-part-"
                                             % os.path.basename(path)[:100], delete=False)
        request = dict(run=params["run"], volume_root=params["volume_root"], user=params["user"],
                       volume=volume["volume"], store=volume["store"], path=inside)
        started, offset, identity, size, last = time.monotonic(), 0, None, 0, time.monotonic()
        try:
            with handle:
                while True:
                    request.update(offset=offset, length=PIECE)
                    done = self._low_level_execute_command(runtime_command("volume-read"), sudoable=True,
                                                           in_data=json.dumps(request).encode())
                    try:
                        piece = runtime_answer(done.get("rc"), done.get("stdout", ""), done.get("stderr", ""),
                                               "volume-read")
                    except RuntimeRefused as exc:
                        raise RuntimeRefused("%s: %s -> %s: %s" % (item["field"], item["source"],
                                                                   item["destination"], exc)) from None
                    if identity is None:
                        identity, size = piece["identity"], piece["size"]
                    elif piece["identity"] != identity or piece["size"] != size:
                        raise RuntimeRefused("%s: %s -> %s: the file changed while it was copied" % (
                            item["field"], item["source"], item["destination"]))
                    data = base64.b64decode(piece["data"])
                    handle.write(data)
                    offset += len(data)
                    if offset >= size or not data:
                        break
                    if time.monotonic() - last >= params["progress_every"]:
                        last = time.monotonic()
                        display.display("%s: %s of %s" % (label, _size(offset), _size(size)))
                handle.flush()
                os.fsync(handle.fileno())
            if offset != size:
                raise RuntimeRefused("%s: %s -> %s: the file ended after %d of its %d bytes" % (
                    item["field"], item["source"], item["destination"], offset, size))
            os.chmod(handle.name, 0o644)
            os.replace(handle.name, path)
        except BaseException:
            try:
                os.unlink(handle.name)
            except OSError:
                pass
            raise
        return dict(bytes=offset, seconds=round(time.monotonic() - started, 3), changed=True)


def _size(count):
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return ("%d %s" if unit == "bytes" else "%.1f %s") % (count, unit)
        count /= 1024.0
    return ""
