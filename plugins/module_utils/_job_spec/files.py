# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""Files: the spec's ``files`` lists ``{path, name, contents}``, the job's
``files`` with their contents from the workflow's top-level ``files``, or
given in place (``plan_files``).

Pure Python (standard library only); it does not import Ansible.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from ansible_collections.fuzz.multinode.plugins.module_utils.fuzzfile import FuzzfileError, Job

__all__ = ["plan_files"]


def plan_files(job: Job, files: Optional[Mapping[str, Any]]) -> List[Dict[str, str]]:
    """The job's ``files`` as the runtime writes them on every node:
    ``[{"path", "name", "contents"}]``, first the ``file://`` references in
    the job's order, with ``contents`` from the workflow's top-level
    ``files`` (name -> contents), then the files whose contents the job gives
    in place (``inline_files``; ``name`` empty). A path must be a normalized
    absolute file path (no ``.``, ``..`` or empty component, no trailing
    ``/``): the runtime creates missing parent directories one by one and
    removes them again at cleanup."""
    planned: List[Dict[str, str]] = []
    sources: List[Tuple[str, str, Optional[str]]] = [
        (path, name, None) for path, name in job.files.items()]
    sources += [(path, "", contents) for path, contents in job.inline_files.items()]
    for path, name, contents in sources:
        where = "%s.files.%s" % (job.field_path, path)
        if any(part in ("", ".", "..") for part in path[1:].split("/")):
            raise FuzzfileError(
                "%s: must be a normalized absolute file path (no '.', '..' or empty "
                "components, no trailing '/')" % where
            )
        if contents is None:
            if files is None or name not in files:
                raise FuzzfileError(
                    "%s: no entry %r in the workflow's top-level files (%s)"
                    % (where, name, ", ".join(sorted(map(str, files or {}))) or "none given")
                )
            contents = files[name]
            if not isinstance(contents, str):
                raise FuzzfileError(
                    "files.%s: must be the file's contents as a string, got %s"
                    % (name, type(contents).__name__)
                )
        planned.append({"path": path, "name": name, "contents": contents})
    return planned
