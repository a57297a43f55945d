"""The deployment files agree with each other and with tern: deploy/kubernetes/tern.yaml (read
with PyYAML) wires labels, ports, probes and names consistently, passes `tern serve` only flags
its --help lists, gives SIGTERM's drain room before the kill, and points the endpoint picker at
metric names a running `tern serve` exports; deploy/Dockerfile's runtime image installs the
Debian packages that hold every shared library ./tern links."""

import os
import re
import subprocess
import urllib.request

import pytest
import yaml

from conftest import ROOT, STORIES, Serve, tern_bin

MANIFEST = os.path.join(ROOT, "deploy", "kubernetes", "tern.yaml")
DOCKERFILE = os.path.join(ROOT, "deploy", "Dockerfile")


def _docs():
    with open(MANIFEST) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def _arg(args, flag):
    return args[args.index(flag) + 1]


def _checked_manifest():
    """Checks the manifest (see the module's text); returns the endpoint picker's arguments."""
    d = _docs()
    dep, svc, pool = d[("Deployment", "tern")], d[("Service", "tern")], d[("InferencePool", "tern")]
    pod = dep["spec"]["template"]
    labels = pod["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert svc["spec"]["selector"].items() <= labels.items()
    assert pool["spec"]["selector"]["matchLabels"].items() <= labels.items()
    c = pod["spec"]["containers"][0]
    args = [str(a) for a in c["args"]]
    assert args[0] == "serve"
    port = int(_arg(args, "--port"))
    assert _arg(args, "--host") == "0.0.0.0"          # reachable from the pod network
    assert c["ports"][0]["containerPort"] == port
    assert svc["spec"]["ports"][0]["targetPort"] == port
    assert pool["spec"]["targetPorts"][0]["number"] == port
    for probe in ("readinessProbe", "livenessProbe"):
        assert c[probe]["httpGet"] == {"path": "/health", "port": port}
    assert pod["spec"]["terminationGracePeriodSeconds"] > int(_arg(args, "--drain-timeout"))
    # every flag given is one `tern serve --help` lists
    helptext = subprocess.run([tern_bin(), "serve", "--help"], stdout=subprocess.PIPE, check=True).stdout.decode()
    known = set(re.findall(r"(--?[a-z][a-z0-9-]*)", helptext))
    for a in args[1:]:
        if a.startswith("-"):
            assert a in known, a
    # the pool's picker: its Service, its Deployment, its service account and role binding
    ref = pool["spec"]["endpointPickerRef"]
    esvc = d[("Service", ref["name"])]
    assert esvc["spec"]["ports"][0]["port"] == ref["port"]["number"]
    edep = d[("Deployment", ref["name"])]
    assert esvc["spec"]["selector"].items() <= edep["spec"]["template"]["metadata"]["labels"].items()
    eargs = [str(a) for a in edep["spec"]["template"]["spec"]["containers"][0]["args"]]
    assert _arg(eargs, "--pool-name") == pool["metadata"]["name"]
    assert int(_arg(eargs, "--grpc-port")) == ref["port"]["number"]
    sa = edep["spec"]["template"]["spec"]["serviceAccountName"]
    rb = d[("RoleBinding", sa)]
    assert rb["subjects"][0]["name"] == sa and ("Role", rb["roleRef"]["name"]) in d
    route = d[("HTTPRoute", "tern")]
    be = route["spec"]["rules"][0]["backendRefs"][0]
    assert (be["kind"], be["name"]) == ("InferencePool", pool["metadata"]["name"])
    return eargs


def test_kubernetes_manifest_consistent():
    assert _checked_manifest()


def test_epp_metric_names_exported():
    eargs = _checked_manifest()
    names = [_arg(eargs, f) for f in ("--total-queued-requests-metric", "--total-running-requests-metric",
                                      "--kv-cache-usage-percentage-metric")]
    path = _arg(eargs, "--model-server-metrics-path")
    with Serve(STORIES) as srv:
        text = urllib.request.urlopen(srv.url + path, timeout=10).read().decode()
    series = {line.split("{")[0].split(" ")[0] for line in text.splitlines() if line and not line.startswith("#")}
    for n in names:
        assert n in series, n


def test_dockerfile_runtime_libraries():
    with open(DOCKERFILE) as f:
        text = f.read()
    runtime = text[text.rindex("FROM "):]
    pkgs = set(re.findall(r"\b(lib[a-z0-9.+-]+)\b", runtime.split("COPY")[0]))
    out = subprocess.run(["readelf", "-d", tern_bin()], stdout=subprocess.PIPE, check=True).stdout.decode()
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", out)
    assert needed
    for lib in needed:
        path = subprocess.run(["sh", "-c", "ldconfig -p | awk '$1 == \"%s\" && /x86-64|AArch64/ {print $NF; exit}'" % lib],
                              stdout=subprocess.PIPE, check=True).stdout.decode().strip()
        assert path, lib
        real = os.path.realpath(path)                 # /usr/lib/... or, as packaged, /lib/...
        owner = ""
        for cand in (real, re.sub(r"^/usr/lib/", "/lib/", real), path):
            r = subprocess.run(["dpkg", "-S", cand], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
            if r.returncode == 0:
                owner = r.stdout.decode().split(":")[0]
                break
        assert owner == "libc6" or owner in pkgs, (lib, owner, pkgs)
