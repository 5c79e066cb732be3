"""Every scenario's create (molecule/shared/create.yml), in place of the
docker driver's: the scenario's networks, then its containers, as the
driver makes them for the platform keys the scenarios use (name, image,
pre_build_image, command, capabilities, tmpfs, volumes, networks; groups
are Molecule's inventory's), in one process of docker commands rather than
a Docker module run for each image, network and container and an async
wait. Like the driver's: owner=molecule on the networks and containers, the
host name the platform's name, a container already there left as it is
(started if it was stopped).

    python3 create.py PLATFORMS_JSON
"""

import json
import shlex
import subprocess
import sys

LABEL = "owner=molecule"  # what the driver labels, and molecule/shared/destroy.yml looks for


def docker(*argv, check=True):
    done = subprocess.run(["docker", *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if check and done.returncode != 0:
        sys.exit("create: docker %s failed: %s" % (" ".join(argv[:3]), done.stderr.strip()))
    return done


def networks_of(platform):
    return [network["name"] for network in platform.get("networks", [])]


def run_argv(platform):
    """`docker run` of a platform, on its first network (the others are
    connected after)."""
    if not platform.get("pre_build_image"):
        sys.exit("create: platform %s: only pre_build_image: true is supported here" % platform["name"])
    argv = ["run", "--detach", "--name", platform["name"], "--hostname", platform["name"],
            "--label", LABEL, "--log-driver", "json-file"]
    for capability in platform.get("capabilities", []):
        argv += ["--cap-add", capability]
    for tmpfs in platform.get("tmpfs", []):
        argv += ["--tmpfs", tmpfs]
    for volume in platform.get("volumes", []):
        argv += ["--volume", volume]
    networks = networks_of(platform)
    if networks:
        argv += ["--network", networks[0]]
    # The driver's default command, and its splitting of a command string.
    command = platform.get("command", 'bash -c "while true; do sleep 10000; done"')
    return argv + [platform["image"]] + shlex.split(command)


def main():
    platforms = json.loads(sys.argv[1])
    made = []
    for name in dict.fromkeys(name for platform in platforms for name in networks_of(platform)):
        if docker("network", "inspect", name, check=False).returncode != 0:
            docker("network", "create", "--label", LABEL, name)
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
    print("\n".join(made))


if __name__ == "__main__":
    main()
