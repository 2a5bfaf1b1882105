"""mosquitto_pub / mosquitto_sub (Debian) against the real broker: 3.1, 3.1.1 and 5."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest

pytestmark = pytest.mark.skipif(
    shutil.which("mosquitto_sub") is None, reason="mosquitto-clients not installed"
)

VERSIONS = ["mqttv31", "mqttv311", "mqttv5"]


def sub(broker, version, *args, count=1, wait=5):
    return subprocess.Popen(
        [
            "mosquitto_sub",
            "-h",
            broker.host,
            "-p",
            str(broker.port),
            "-V",
            version,
            "-v",
            "-C",
            str(count),
            "-W",
            str(wait),
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def pub(broker, version, *args):
    subprocess.run(
        ["mosquitto_pub", "-h", broker.host, "-p", str(broker.port), "-V", version, *args],
        check=True,
        timeout=10,
        capture_output=True,
    )


def ready(proc):
    time.sleep(0.4)  # mosquitto_sub has no "subscribed" signal; its SUBACK arrives in ms
    assert proc.poll() is None, proc.stderr.read()


def uniq(name):
    return f"mosq/{name}/{time.monotonic_ns()}"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("qos", [0, 1, 2])
def test_pub_sub_qos(module_broker, version, qos):
    t = uniq("qos")
    s = sub(module_broker, version, "-t", t, "-q", str(qos))
    ready(s)
    pub(module_broker, version, "-t", t, "-m", f"hello{qos}", "-q", str(qos))
    out, err = s.communicate(timeout=10)
    assert out.strip() == f"{t} hello{qos}", err


@pytest.mark.parametrize("version", VERSIONS)
def test_retained_and_wildcards(module_broker, version):
    t = uniq("ret")
    pub(module_broker, version, "-t", f"{t}/a/x", "-m", "ra", "-r", "-q", "1")
    pub(module_broker, version, "-t", f"{t}/b/x", "-m", "rb", "-r", "-q", "1")
    pub(module_broker, version, "-t", f"{t}/b/y", "-m", "no", "-r", "-q", "1")
    s = sub(module_broker, version, "-t", f"{t}/+/x", count=2)
    out, _ = s.communicate(timeout=10)
    assert sorted(out.split("\n")[:2]) == [f"{t}/a/x ra", f"{t}/b/x rb"]
    s = sub(module_broker, version, "-t", f"{t}/#", count=3)
    out, _ = s.communicate(timeout=10)
    assert len(out.strip().splitlines()) == 3


@pytest.mark.parametrize("version", VERSIONS)
def test_will(module_broker, version):
    t = uniq("will")
    watcher = sub(module_broker, version, "-t", t)
    ready(watcher)
    dying = subprocess.Popen(
        [
            "mosquitto_sub",
            "-h",
            module_broker.host,
            "-p",
            str(module_broker.port),
            "-V",
            version,
            "-t",
            t + "/ignored",
            "--will-topic",
            t,
            "--will-payload",
            "gone",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.4)  # mosquitto_sub prints nothing when connected: give its CONNECT the time
    dying.kill()  # no DISCONNECT: the will must be published
    dying.wait()
    out, _ = watcher.communicate(timeout=10)
    assert out.strip() == f"{t} gone"


def test_v5_properties_through_mosquitto(module_broker):
    t = uniq("props")
    s = sub(module_broker, "mqttv5", "-t", t, "-F", "%t %p %P")
    ready(s)
    pub(module_broker, "mqttv5", "-t", t, "-m", "x", "-D", "publish", "user-property", "k", "v")
    out, _ = s.communicate(timeout=10)
    assert out.strip() == f"{t} x k:v"


def test_v5_shared_subscription_with_mosquitto(module_broker):
    t = uniq("share")
    a = sub(module_broker, "mqttv5", "-t", f"$share/g/{t}", count=2, wait=3)
    b = sub(module_broker, "mqttv5", "-t", f"$share/g/{t}", count=2, wait=3)
    ready(a)
    ready(b)
    for i in range(4):
        pub(module_broker, "mqttv5", "-t", t, "-m", str(i), "-q", "1")
    out_a, _ = a.communicate(timeout=10)
    out_b, _ = b.communicate(timeout=10)
    got = sorted(line.split()[1] for line in (out_a + out_b).strip().splitlines())
    assert got == ["0", "1", "2", "3"]
