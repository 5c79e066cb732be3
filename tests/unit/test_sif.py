"""multinode_runtime.sif against SIF files written by the tests' own writer
(molecule/shared/sif_writer.py) from real squashfs images (mksquashfs):
the root file system partition is found, copied out byte for byte and
unpacks (unsquashfs) to the files it was made of; every other file gets a
message saying what is wrong with it."""

import os
import struct
import subprocess
import sys

import pytest
from multinode_runtime import sif

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "molecule", "shared"))
import sif_writer  # noqa: E402


@pytest.fixture
def rootfs(tmp_path):
    """A tiny root file system: a file, an executable, a link, an empty dir."""
    root = tmp_path / "rootfs"
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text("ID=fmn-test\n")
    (root / "bin").mkdir()
    (root / "bin" / "hello").write_text("#!/bin/sh\necho hello\n")
    (root / "bin" / "hello").chmod(0o755)
    (root / "bin" / "hi").symlink_to("hello")
    (root / "tmp").mkdir()
    return root


@pytest.fixture
def squashfs(tmp_path, rootfs):
    path = tmp_path / "rootfs.squashfs"
    sif_writer.squash(str(rootfs), str(path))
    return path


def test_round_trip_finds_extracts_and_unpacks_the_root_partition(tmp_path, rootfs, squashfs):
    image = tmp_path / "image.sif"
    sif_writer.sif_from_rootfs(str(rootfs), str(image))

    part = sif.root_partition(str(image))
    out = tmp_path / "extracted.squashfs"
    assert sif.extract_root_partition(str(image), str(out)) == part
    assert part.fs_type == sif.FS_SQUASHFS and part.part_type == sif.PART_PRIMARY_SYSTEM
    # sylabs' layout: 48 descriptors from 4096, a partition aligned on 4096
    # after them (pkg/sif's old DataStartOffset).
    assert part.offset == 32768
    assert out.read_bytes()[:4] == b"hsqs" and out.stat().st_size == part.size

    unpacked = tmp_path / "unpacked"
    subprocess.run(["unsquashfs", "-no-progress", "-quiet", "-d", str(unpacked), str(out)], check=True,
                   stdout=subprocess.DEVNULL)
    assert (unpacked / "etc" / "os-release").read_text() == "ID=fmn-test\n"
    assert os.access(unpacked / "bin" / "hello", os.X_OK)
    assert os.readlink(unpacked / "bin" / "hi") == "hello"
    assert (unpacked / "tmp").is_dir()


def test_the_writer_follows_the_documented_layout(tmp_path, squashfs):
    """Checked at the format's offsets, not with the reader's structures."""
    image = tmp_path / "image.sif"
    sif_writer.write_sif(str(image), str(squashfs))
    data = image.read_bytes()
    assert data[:32].rstrip(b"\0") == b"#!/usr/bin/env run-singularity\n"
    assert data[32:42] == b"SIF_MAGIC\0" and data[42:45] == b"01\0"
    total, table = struct.unpack_from("<qq", data, 64 + 8 + 8 + 8)
    assert (total, table) == (48, 4096)
    first, second = 4096, 4096 + 585
    assert struct.unpack_from("<i?", data, first) == (0x4001, True)  # definition file
    assert struct.unpack_from("<i?", data, second) == (0x4004, True)  # partition
    offset, size = struct.unpack_from("<qq", data, second + 17)
    assert struct.unpack_from("<ii", data, second + 73 + 128) == (1, 2)  # squashfs, primary system
    assert data[offset:offset + size] == squashfs.read_bytes()
    assert struct.unpack_from("<i?", data, second + 585) == (0, False)  # unused from here


def test_a_file_that_is_not_a_sif(tmp_path, squashfs):
    for content in (b"", b"#!/bin/sh\necho not a sif\n", b"\0" * 8192, squashfs.read_bytes()):
        path = tmp_path / "not.sif"
        path.write_bytes(content)
        with pytest.raises(sif.SifError, match="not a SIF file"):
            sif.root_partition(str(path))


@pytest.mark.parametrize("keep", [100, 5000, 32768 + 100])
def test_a_truncated_sif(tmp_path, squashfs, keep):
    """Cut in the header, in the descriptor table, in the partition."""
    image = tmp_path / "image.sif"
    sif_writer.write_sif(str(image), str(squashfs))
    image.write_bytes(image.read_bytes()[:keep])
    with pytest.raises(sif.SifError, match="truncated SIF file"):
        sif.root_partition(str(image))


def test_no_primary_system_partition(tmp_path, squashfs):
    image = tmp_path / "image.sif"
    sif_writer.write_sif(str(image), str(squashfs), part_type=sif_writer.PART_SYSTEM)
    with pytest.raises(sif.SifError, match=r"no root file system partition in the SIF \(partitions: squashfs system\)"):
        sif.root_partition(str(image))


def test_a_root_partition_of_another_file_system(tmp_path, squashfs):
    image = tmp_path / "image.sif"
    sif_writer.write_sif(str(image), str(squashfs), fs_type=sif_writer.FS_EXT3)
    with pytest.raises(sif.SifError, match="its root file system partition is ext3, not squashfs"):
        sif.root_partition(str(image))


def test_a_squashfs_partition_without_squashfs(tmp_path):
    junk = tmp_path / "junk"
    junk.write_bytes(b"not squashfs at all" * 100)
    image = tmp_path / "image.sif"
    sif_writer.write_sif(str(image), str(junk))
    with pytest.raises(sif.SifError, match="says squashfs but holds no squashfs"):
        sif.root_partition(str(image))


def test_no_partition_at_all(tmp_path, squashfs):
    image = tmp_path / "image.sif"
    sif_writer.write_sif(str(image), str(squashfs))
    data = bytearray(image.read_bytes())
    data[4096 + 585 + 4] = 0  # the partition's descriptor: unused
    image.write_bytes(bytes(data))
    with pytest.raises(sif.SifError, match=r"\(partitions: none\)"):
        sif.root_partition(str(image))


def test_another_sif_version(tmp_path, squashfs):
    image = tmp_path / "image.sif"
    sif_writer.write_sif(str(image), str(squashfs))
    data = bytearray(image.read_bytes())
    data[42:45] = b"02\0"
    image.write_bytes(bytes(data))
    with pytest.raises(sif.SifError, match="SIF version '02' not supported"):
        sif.root_partition(str(image))
