"""Writing SIF (Singularity Image Format) files for the tests: a root file
system directory, squashed with Debian's mksquashfs, as the primary system
partition of a SIF laid out as sylabs' sif library (pkg/sif, create.go)
writes one: descriptor table at 4096 with room for 48 descriptors, data
after it, a partition aligned on 4096 bytes.

Written field by field from the format's description, apart from the node
runtime's reader (multinode_runtime.sif), so that reading back what this
writes tests the reader against the format, not against itself.
"""

import argparse
import os
import struct
import subprocess
import sys
import tempfile
import uuid

LAUNCH = b"#!/usr/bin/env run-singularity\n"
DESCRIPTORS_OFFSET = 4096
DESCRIPTOR_CAPACITY = 48
DESCRIPTOR_SIZE = 585
PARTITION_ALIGNMENT = 4096

DATA_DEFFILE = 0x4001
DATA_PARTITION = 0x4004
FS_SQUASHFS = 1
FS_EXT3 = 2
PART_SYSTEM = 1
PART_PRIMARY_SYSTEM = 2
ARCH_AMD64 = b"02\0"
GROUP_MASK = 0xF0000000


def squash(rootfs, dest):
    """mksquashfs the directory rootfs into the new file dest, owners kept
    (the image's files belong to root inside it, as built by root)."""
    subprocess.run(["mksquashfs", rootfs, dest, "-noappend", "-quiet", "-no-progress", "-comp", "gzip"],
                   check=True, stdout=subprocess.DEVNULL)


def write_sif(dest, partition, *, fs_type=FS_SQUASHFS, part_type=PART_PRIMARY_SYSTEM, deffile=b"Bootstrap: scratch\n"):
    """Write the SIF file dest holding a definition file object (when deffile
    is not empty) and the partition image file partition."""
    with open(partition, "rb") as f:
        partition_bytes = f.read()
    data_offset = DESCRIPTORS_OFFSET + DESCRIPTOR_CAPACITY * DESCRIPTOR_SIZE
    objects = []  # (data type, offset, size, padded size, extra, bytes)
    end = data_offset
    if deffile:
        objects.append((DATA_DEFFILE, end, len(deffile), len(deffile), b"", deffile))
        end += len(deffile)
    offset = -(-end // PARTITION_ALIGNMENT) * PARTITION_ALIGNMENT
    extra = struct.pack("<i", fs_type) + struct.pack("<i", part_type) + ARCH_AMD64
    objects.append((DATA_PARTITION, offset, len(partition_bytes), offset - end + len(partition_bytes), extra,
                    partition_bytes))
    end = offset + len(partition_bytes)

    now = 1_700_000_000
    table = b""
    for i, (data_type, obj_offset, size, padded, obj_extra, _unused) in enumerate(objects):
        table += (struct.pack("<i", data_type) + b"\x01"  # used
                  + struct.pack("<III", i + 1, GROUP_MASK | 1, 0)  # id, group 1, no link
                  + struct.pack("<qqq", obj_offset, size, padded)
                  + struct.pack("<qqqq", now, now, 0, 0)  # created, modified, uid, gid
                  + b"\0" * 128  # name
                  + obj_extra.ljust(384, b"\0"))
    table = table.ljust(DESCRIPTOR_CAPACITY * DESCRIPTOR_SIZE, b"\0")

    header = (LAUNCH.ljust(32, b"\0") + b"SIF_MAGIC\0" + b"01\0"
              + (ARCH_AMD64 if part_type == PART_PRIMARY_SYSTEM else b"00\0")
              + uuid.uuid4().bytes
              + struct.pack("<qq", now, now)
              + struct.pack("<qq", DESCRIPTOR_CAPACITY - len(objects), DESCRIPTOR_CAPACITY)
              + struct.pack("<qq", DESCRIPTORS_OFFSET, len(table))
              + struct.pack("<qq", data_offset, end - data_offset))
    assert len(header) == 128

    with open(dest, "wb") as out:
        out.write(header)
        out.seek(DESCRIPTORS_OFFSET)
        out.write(table)
        for _unused, obj_offset, _unused, _unused, _unused, data in objects:
            out.seek(obj_offset)
            out.write(data)


def sif_from_rootfs(rootfs, dest, **kwargs):
    """Write the SIF file dest whose root file system is the directory rootfs."""
    with tempfile.TemporaryDirectory(prefix="fmn-sif-") as tmp:
        squashfs = os.path.join(tmp, "rootfs.squashfs")
        squash(rootfs, squashfs)
        write_sif(dest, squashfs, **kwargs)


def sif_from_docker_image(image, dest, **kwargs):
    """Write the SIF file dest whose root file system is that of the local
    Docker image image (as `docker export` gives it)."""
    container = subprocess.run(["docker", "create", image, "/bin/true"], check=True, capture_output=True,
                               text=True).stdout.strip()
    try:
        with tempfile.TemporaryDirectory(prefix="fmn-sif-") as tmp:
            rootfs = os.path.join(tmp, "rootfs")
            os.mkdir(rootfs)
            export = subprocess.Popen(["docker", "export", container], stdout=subprocess.PIPE)
            subprocess.run(["tar", "-C", rootfs, "--numeric-owner", "-x"], stdin=export.stdout, check=True)
            export.stdout.close()
            if export.wait() != 0:
                raise RuntimeError("docker export %s failed" % image)
            sif_from_rootfs(rootfs, dest, **kwargs)
    finally:
        subprocess.run(["docker", "rm", container], check=True, stdout=subprocess.DEVNULL)


SIF_CONFIG = "application/vnd.sylabs.sif.config.v1+json"
SIF_LAYER = "application/vnd.sylabs.sif.layer.v1.sif"


def push_sif(sif, target, insecure=True, login=None, config_type=SIF_CONFIG, layer_type=SIF_LAYER):
    """Push the SIF file sif to target (HOST:PORT/REPOSITORY:TAG) with the
    ORAS Python SDK, as `apptainer push oras://` stores one: an OCI manifest
    whose config is of SIF_CONFIG and whose one layer is the SIF, of
    SIF_LAYER (other types make an image that is not a SIF). login is
    (user, password) for a registry that wants them. Returns the manifest's
    digest ("sha256:...")."""
    import oras.client  # the controller's venv (requirements.txt)

    host = target.split("/", 1)[0]
    with tempfile.TemporaryDirectory(prefix="fmn-sif-push-") as tmp:
        config = os.path.join(tmp, "config.json")
        with open(config, "w") as f:
            f.write("{}")
        client = oras.client.OrasClient(hostname=host, insecure=insecure, auth_backend="basic")
        if login:
            client.auth.set_basic_auth(*login)
        response = client.push(target=target, files=["%s:%s" % (os.path.abspath(sif), layer_type)],
                               manifest_config="%s:%s" % (config, config_type), disable_path_validation=True)
    response.raise_for_status()
    return response.headers["Docker-Content-Digest"]


def main(argv=None):
    parser = argparse.ArgumentParser(description="Write a SIF from a root file system (and push it).")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--rootfs", help="a root file system directory")
    source.add_argument("--docker-image", help="a local Docker image")
    source.add_argument("--sif", help="a SIF file written before (to push it)")
    parser.add_argument("--output", help="the SIF file to write (with --rootfs or --docker-image)")
    parser.add_argument("--push", metavar="HOST:PORT/REPOSITORY:TAG",
                        help="push it to this (plain http) registry and print the manifest's digest")
    args = parser.parse_args(argv)
    if not args.sif and not args.output:
        parser.error("--output is needed with --rootfs or --docker-image")
    if args.rootfs:
        sif_from_rootfs(args.rootfs, args.output)
    elif args.docker_image:
        sif_from_docker_image(args.docker_image, args.output)
    if args.push:
        print(push_sif(args.sif or args.output, args.push))


if __name__ == "__main__":
    sys.exit(main())
