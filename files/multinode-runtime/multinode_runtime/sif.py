"""Reading SIF (Singularity Image Format) files: find the root file system
partition, the primary system squashfs partition, and copy its bytes out.

The layout is that of github.com/sylabs/sif (pkg/sif: sif.go, descriptor.go),
all integers little-endian, structures packed:

    global header (128 bytes at offset 0)
        launch script 32, magic "SIF_MAGIC\\0" 10, version "01\\0" 3,
        arch 3, uuid 16, then int64: created, modified, descriptors free,
        descriptors total, descriptors offset, descriptors size,
        data offset, data size
    descriptor table (descriptors total x 585 bytes at descriptors offset)
        int32 data type, bool used, uint32 id, group id, linked id,
        int64 offset, size, size with padding, created, modified, uid, gid,
        name 128, extra 384 (a partition's: int32 fs type,
        int32 partition type, arch 3)
    data objects, each at its descriptor's offset, its size long
"""

import struct
from typing import List, NamedTuple

HEADER = struct.Struct("<32s10s3s3s16s8q")
DESCRIPTOR = struct.Struct("<i?IIIqqqqqqq128s384s")
PARTITION_EXTRA = struct.Struct("<ii3s")

MAGIC = b"SIF_MAGIC\0"
VERSION = b"01\0"

DATA_PARTITION = 0x4004
FS_SQUASHFS = 1
FS_ENCRYPTED_SQUASHFS = 5
PART_PRIMARY_SYSTEM = 2

# squashfs's own magic, at the start of the partition ("hsqs" little-endian).
SQUASHFS_MAGIC = b"hsqs"

# More descriptors than any real image has (sylabs' default is 48): a header
# claiming more is damaged, not a reason to read gigabytes.
MAX_DESCRIPTORS = 4096

_FS_NAMES = {1: "squashfs", 2: "ext3", 3: "archive", 4: "raw", 5: "encrypted squashfs"}
_PART_NAMES = {1: "system", 2: "primary system", 3: "data", 4: "overlay"}


class SifError(Exception):
    """The file is not a SIF this runtime can run; the message says why."""


class Partition(NamedTuple):
    """Where a partition's bytes are in the file, and what they are."""

    offset: int
    size: int
    fs_type: int
    part_type: int


def read_partitions(path: str) -> List[Partition]:
    """Every used partition descriptor of the SIF at path, in table order."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        f.seek(0)
        head = f.read(HEADER.size)
        if len(head) < 42 or head[32:42] != MAGIC:
            raise SifError("not a SIF file (no SIF_MAGIC in its header)")
        if len(head) < HEADER.size:
            raise SifError("truncated SIF file (%d bytes, shorter than its header)" % size)
        fields = HEADER.unpack(head)
        version = fields[2]
        total, table_offset = fields[8], fields[9]
        if version != VERSION:
            raise SifError("SIF version %r not supported (only 01)" % version.rstrip(b"\0").decode("ascii", "replace"))
        if not 0 <= total <= MAX_DESCRIPTORS or table_offset < HEADER.size:
            raise SifError("damaged SIF header (%d descriptors at offset %d)" % (total, table_offset))
        if table_offset + total * DESCRIPTOR.size > size:
            raise SifError("truncated SIF file (%d bytes, its descriptor table ends at %d)"
                           % (size, table_offset + total * DESCRIPTOR.size))
        f.seek(table_offset)
        table = f.read(total * DESCRIPTOR.size)
    partitions = []
    for i in range(total):
        d = DESCRIPTOR.unpack_from(table, i * DESCRIPTOR.size)
        data_type, used, offset, length, extra = d[0], d[1], d[5], d[6], d[13]
        if not used or data_type != DATA_PARTITION:
            continue
        fs_type, part_type, _arch = PARTITION_EXTRA.unpack_from(extra)
        if offset < 0 or length < 0:
            raise SifError("damaged SIF descriptor (a partition at offset %d, %d bytes)" % (offset, length))
        if offset + length > size:
            raise SifError("truncated SIF file (%d bytes, a partition ends at %d)" % (size, offset + length))
        partitions.append(Partition(offset, length, fs_type, part_type))
    return partitions


def root_partition(path: str) -> Partition:
    """The primary system squashfs partition of the SIF at path: what
    Apptainer mounts as the container's root."""
    partitions = read_partitions(path)
    for p in partitions:
        if p.part_type != PART_PRIMARY_SYSTEM:
            continue
        if p.fs_type != FS_SQUASHFS:
            raise SifError("its root file system partition is %s, not squashfs" % _describe_fs(p.fs_type))
        with open(path, "rb") as f:
            f.seek(p.offset)
            if f.read(len(SQUASHFS_MAGIC)) != SQUASHFS_MAGIC:
                raise SifError("its root file system partition says squashfs but holds no squashfs")
        return p
    found = ", ".join("%s %s" % (_describe_fs(p.fs_type), _PART_NAMES.get(p.part_type, "type %d" % p.part_type))
                      for p in partitions)
    raise SifError("no root file system partition in the SIF (partitions: %s)" % (found or "none"))


def extract_root_partition(path: str, dest: str) -> Partition:
    """Copy the root file system partition of the SIF at path into a new
    file dest (a squashfs image); returns the partition."""
    p = root_partition(path)
    with open(path, "rb") as src, open(dest, "xb") as out:
        src.seek(p.offset)
        left = p.size
        while left:
            chunk = src.read(min(left, 1 << 20))
            if not chunk:
                raise SifError("truncated SIF file (it ended inside its root file system partition)")
            out.write(chunk)
            left -= len(chunk)
    return p


def _describe_fs(fs_type: int) -> str:
    return _FS_NAMES.get(fs_type, "file system type %d" % fs_type)
