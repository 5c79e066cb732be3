"""Every scenario's create and destroy (molecule/shared/create.yml,
destroy.yml), in place of the docker driver's, in one process of docker
commands rather than a Docker module run for each image, network and
container and an async wait.

    python3 cluster.py create PLATFORMS_JSON
        the scenario's networks, then its containers, as the driver makes
        them for the platform keys the scenarios use (name, image,
        pre_build_image, command, capabilities, tmpfs, volumes, networks;
        groups are Molecule's inventory's; any other is refused, before
        anything is made): owner=molecule on each, the host name the
        platform's name, a container already there left as it is (started
        if it was stopped)
    python3 cluster.py destroy PLATFORMS_JSON
        its containers removed by force (their volumes kept), then the
        networks Molecule made for them (owner=molecule), as the driver's
        destroy
"""

import json
import shlex
import subprocess
import sys

OWNER = "molecule"  # the owner label the driver puts on what it makes
# The platform keys create() makes as the driver does; groups are the
# inventory's. Any other is refused rather than left out.
KEYS = {"name", "image", "pre_build_image", "command", "capabilities", "tmpfs", "volumes", "networks", "groups"}


def docker(*argv, check=True):
    done = subprocess.run(["docker", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if check and done.returncode != 0:
        sys.exit("cluster: docker %s failed: %s" % (" ".join(argv[:3]), done.stderr.strip()))
    return done


def networks_of(platform):
    return [network["name"] for network in platform.get("networks", [])]


def check(platform):
    """Exit naming what of the platform this file does not make."""
    if not platform.get("pre_build_image"):
        sys.exit("cluster: platform %s: only pre_build_image: true is supported here" % platform["name"])
    unknown = sorted(set(platform) - KEYS)
    if unknown:
        sys.exit("cluster: platform %s: %s not supported here (molecule/shared/cluster.py makes %s)"
                 % (platform["name"], ", ".join(unknown), ", ".join(sorted(KEYS))))


def run_argv(platform):
    """`docker run` of a platform, on its first network (the others are
    connected after)."""
    argv = ["run", "--detach", "--name", platform["name"], "--hostname", platform["name"],
            "--label", "owner=" + OWNER, "--log-driver", "json-file"]
    for capability in platform.get("capabilities", []):
        argv += ["--cap-add", capability]
    for tmpfs in platform.get("tmpfs", []):
        argv += ["--tmpfs", tmpfs]
    for volume in platform.get("volumes", []):
        argv += ["--volume", volume]
    if networks_of(platform):
        argv += ["--network", networks_of(platform)[0]]
    # The driver's default command, and its splitting of a command string.
    command = platform.get("command", 'bash -c "while true; do sleep 10000; done"')
    return argv + [platform["image"]] + shlex.split(command)


def networks(platforms):
    return list(dict.fromkeys(name for platform in platforms for name in networks_of(platform)))


def create(platforms):
    for platform in platforms:
        check(platform)  # every one, before anything is made
    made = []
    for name in networks(platforms):
        if docker("network", "inspect", name, check=False).returncode != 0:
            docker("network", "create", "--label", "owner=" + OWNER, name)
            made.append("network " + name)
    for platform in platforms:
        state = docker("container", "inspect", "--format", "{{.State.Running}}", platform["name"], check=False)
        if state.returncode == 0:
            if state.stdout.strip() != "true":
                docker("start", platform["name"])
                made.append("started " + platform["name"])
            continue
        docker(*run_argv(platform))
        for network in networks_of(platform)[1:]:
            docker("network", "connect", network, platform["name"])
        made.append("container " + platform["name"])
    return made


def destroy(platforms):
    removed = []
    for platform in platforms:
        if docker("container", "inspect", platform["name"], check=False).returncode == 0:
            docker("rm", "--force", platform["name"])
            removed.append("container " + platform["name"])
    for name in networks(platforms):
        owner = docker("network", "inspect", "--format", '{{index .Labels "owner"}}', name, check=False)
        if owner.returncode == 0 and owner.stdout.strip() == OWNER:
            docker("network", "rm", name)
            removed.append("network " + name)
    return removed


def main():
    action = {"create": create, "destroy": destroy}[sys.argv[1]]
    print("\n".join(action(json.loads(sys.argv[2]))))


if __name__ == "__main__":
    main()
