# -*- coding: utf-8 -*-
# Copyright (c) fuzz.multinode developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
# SPDX-License-Identifier: Apache-2.0
"""The one exception of the Fuzzfile model."""

from __future__ import annotations


class FuzzfileError(ValueError):
    """A Fuzzfile (or a job passed between modules) is invalid.

    The message names the field path and the problem.
    """
