"""A create-if-absent PUT the store applied but whose response never reached the client.

The AWS SDK (v1 under S3A 3.3, v2 under 3.4+) retries a PUT whose connection broke; the retry carries
``If-None-Match: *`` too and meets the object its own first attempt wrote, so the store answers
412. ``conditional`` and ``manifest`` must take that 412 for their own write (the object holds
their write id), not for another writer's, and two writers must still never both win.

The response is lost by a TCP relay between the JVM and the real store (moto or Ceph RGW): it
forwards bytes both ways and, for the first request whose request line names a given PUT, lets
the store answer and then resets the client's connection instead of passing the answer on.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import urllib.parse
import uuid

import pytest
from py4j.protocol import Py4JJavaError

import ckpt_impls
from ckptbench.experiments.contract import java_class, race
from helpers import CheckpointFiles

WRITE_ID = "ckptbench-write-id"
_HEAD_END = b"\r\n\r\n"
_LENGTH = re.compile(rb"\r\ncontent-length:\s*(\d+)", re.IGNORECASE)
_INTERIM = re.compile(rb"HTTP/1\.[01] 1\d\d [^\r\n]*\r\n(?:[^\r\n]+\r\n)*\r\n")
_FINAL = re.compile(rb"HTTP/1\.[01] ([2-5]\d\d) ")
_WRITE_ID_HEADER = re.compile(rb"\r\nx-amz-meta-" + WRITE_ID.encode() + rb":[^\r\n]*\r\n", re.IGNORECASE)


class LosingRelay:
    """Loopback TCP relay to ``upstream`` (http://host:port), one thread per direction and
    connection. HTTP/1.1 framing is read only as far as needed: the request line and
    Content-Length of each request; the status line of an answer it loses; the head of a HEAD's
    answer when hiding write ids. Clients do not pipeline, so a connection's next answer is the
    answer to its last request."""

    def __init__(self, upstream: str) -> None:
        url = urllib.parse.urlsplit(upstream)
        self.upstream = (url.hostname, url.port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.endpoint = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.lines: list[str] = []  # every request line seen, in order
        self.rules: list[tuple[str, bytes | None]] = []  # (line prefix, None: lose | canned answer)
        self.lost: list[tuple[str, int]] = []  # (request line, status the store answered) never delivered
        self.hide_write_ids = False  # drop the write id from HEAD answers, as a store without user metadata
        self.hidden = 0  # write ids dropped so far
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def lose_response(self, line_prefix: str) -> None:
        """The next request whose line starts with ``line_prefix`` reaches the store; its
        answer does not reach the client, whose connection is reset (RST) instead."""
        self.rules.append((line_prefix, None))

    def answer_instead(self, line_prefix: str, response: bytes, times: int) -> None:
        """The next ``times`` matching requests never reach the store; the client gets ``response``."""
        self.rules.extend([(line_prefix, response)] * times)

    def count(self, line_prefix: str) -> int:
        with self.lock:
            return sum(line.startswith(line_prefix) for line in self.lines)

    def close(self) -> None:
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            store = socket.create_connection(self.upstream)
            # What the next answer on this connection is for: ("lose", request line) or ("hide", line).
            pending: list[tuple[str, str]] = []
            threading.Thread(target=self._requests, args=(client, store, pending), daemon=True).start()
            threading.Thread(target=self._answers, args=(store, client, pending), daemon=True).start()

    def _rule_for(self, line: str) -> tuple[str, bytes | None] | None:
        """Records ``line``; the first rule it matches, used up, or None."""
        with self.lock:
            self.lines.append(line)
            for i, rule in enumerate(self.rules):
                if line.startswith(rule[0]):
                    return self.rules.pop(i)
        return None

    def _requests(self, client: socket.socket, store: socket.socket, pending: list) -> None:
        buf = b""
        try:
            while True:
                while _HEAD_END not in buf:
                    data = client.recv(65536)
                    if not data:
                        return
                    buf += data
                head, buf = buf.split(_HEAD_END, 1)
                line = head.split(b"\r\n", 1)[0].decode("latin-1")
                rule = self._rule_for(line)
                if rule is not None and rule[1] is not None:
                    client.sendall(rule[1])  # answered here, then closed (the answer says so)
                    return
                if rule is not None:
                    pending.append(("lose", line))
                elif self.hide_write_ids and line.startswith("HEAD "):
                    pending.append(("hide", line))
                store.sendall(head + _HEAD_END)
                length = int(m.group(1)) if (m := _LENGTH.search(head)) else 0
                while length:
                    if not buf:
                        buf = client.recv(65536)
                        if not buf:
                            return
                    part, buf = buf[:length], buf[length:]
                    store.sendall(part)
                    length -= len(part)
        except OSError:
            pass
        finally:
            _close(client, reset=_losing(pending))
            store.close()

    def _answers(self, store: socket.socket, client: socket.socket, pending: list) -> None:
        held = b""
        try:
            while data := store.recv(65536):
                if not pending:
                    client.sendall(data)
                    continue
                held += data
                # Interim answers (100 Continue) go through: the client sends the body after them.
                while m := _INTERIM.match(held):
                    client.sendall(m.group(0))
                    held = held[m.end():]
                if pending[0][0] == "lose" and (m := _FINAL.match(held)):
                    with self.lock:
                        self.lost.append((pending[0][1], int(m.group(1))))
                    return  # the store has answered: drop the answer, reset the client (finally)
                if pending[0][0] == "hide" and _HEAD_END in held:  # a HEAD's answer is a head alone
                    answer, n = _WRITE_ID_HEADER.subn(b"\r\n", held)
                    with self.lock:
                        self.hidden += n
                    pending.pop(0)
                    client.sendall(answer)
                    held = b""
        except OSError:
            pass
        finally:
            _close(client, reset=_losing(pending))
            store.close()


def _losing(pending: list) -> bool:
    return bool(pending) and pending[0][0] == "lose"


def _close(sock: socket.socket, reset: bool) -> None:
    """Close ``sock``; with ``reset``, abortively (SO_LINGER 0): the peer gets a RST, as from a
    connection broken before the answer, and unsent bytes are dropped."""
    try:
        if reset:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.shutdown(socket.SHUT_RD)  # wakes the other direction's recv on this socket
        else:
            sock.shutdown(socket.SHUT_WR)  # what was sent is delivered before the FIN
    except OSError:
        pass
    sock.close()


class Relayed:
    """``inner`` as S3A should reach it: through ``relay``, with the same keys and settings."""

    def __init__(self, inner, relay: LosingRelay) -> None:
        self.inner, self.name, self.endpoint = inner, inner.name, relay.endpoint
        self.region, self.credentials = inner.region, inner.credentials

    def s3a_options(self, sdk: str) -> dict[str, str]:
        return self.inner.s3a_options(sdk)


@pytest.fixture
def lossy(spark, store):
    """``(relay, bucket)``: a fresh bucket on ``store`` that the session reaches through a relay
    (a fresh bucket, so S3A builds a new filesystem, and client, for it)."""
    bucket = f"ckptbench-{store.name}-lost-{uuid.uuid4().hex[:6]}"
    store.create_bucket(bucket)
    relay = LosingRelay(store.endpoint)
    ckpt_impls.attach(spark, Relayed(store, relay), bucket)
    yield relay, bucket
    relay.close()


def test_conditional_takes_a_412_for_its_own_write(spark, store, lossy):
    relay, bucket = lossy
    files = CheckpointFiles(spark, "conditional", store, "ck", bucket)
    files.mkdirs("offsets")
    files.write("offsets/1", b"batch 1")
    assert relay.count(f"HEAD /{bucket}/ck/offsets/1 ") == 0, "a HEAD on the normal path"

    put = f"PUT /{bucket}/ck/offsets/0 "
    relay.lose_response(put)
    files.write("offsets/0", b"batch 0")
    assert relay.lost == [(put + "HTTP/1.1", 200)], "the store did not apply the attempt whose answer was lost"
    assert relay.count(put) == 2, "the SDK did not retry the PUT whose answer was lost"
    # The retry met the object its first attempt wrote (412), and one HEAD found our write id.
    assert relay.count(f"HEAD /{bucket}/ck/offsets/0 ") == 1
    assert files.read("offsets/0") == b"batch 0"
    files.assert_files({"offsets/0", "offsets/1"})
    # The store kept the write id sent with the conditional PUT (what the 412 check relies on).
    head = store.client().head_object(Bucket=bucket, Key="ck/offsets/0")
    uuid.UUID(head["Metadata"][WRITE_ID])
    with pytest.raises(Py4JJavaError) as raised:  # another write of the same file is still refused
        files.write("offsets/0", b"again")
    assert java_class(raised.value) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert files.read("offsets/0") == b"batch 0"


def test_manifest_takes_a_412_on_its_own_record(spark, store, lossy):
    relay, bucket = lossy
    files = CheckpointFiles(spark, "manifest", store, "ck", bucket)
    files.mkdirs("offsets")
    put = f"PUT /{bucket}/ck/offsets/_manifest/r/{1:020d} "
    relay.lose_response(put)
    files.write("offsets/0", b"batch 0")
    assert relay.lost == [(put + "HTTP/1.1", 200)], "the store did not apply the attempt whose answer was lost"
    assert relay.count(put) == 2, "the SDK did not retry the PUT whose answer was lost"
    assert relay.count(put.replace("PUT", "HEAD", 1)) == 1
    assert files.read("offsets/0") == b"batch 0"
    assert files.visible() == {"offsets/0"}
    assert store.list_keys(bucket, "ck/offsets/_manifest/r/") == [f"ck/offsets/_manifest/r/{1:020d}"]
    reloaded = CheckpointFiles(spark, "manifest", store, "ck", bucket)  # the history, read afresh
    assert reloaded.names("offsets") == {"0"} and reloaded.read("offsets/0") == b"batch 0"


def test_manifest_takes_its_own_record_on_a_store_without_write_ids(spark, store, lossy):
    """A store that drops user metadata: the HEAD after the 412 finds no write id, and the
    manifest tells its own record by its bytes (a put carries an id no other write uses)."""
    relay, bucket = lossy
    files = CheckpointFiles(spark, "manifest", store, "ck", bucket)
    files.mkdirs("offsets")
    relay.hide_write_ids = True
    put = f"PUT /{bucket}/ck/offsets/_manifest/r/{1:020d} "
    relay.lose_response(put)
    files.write("offsets/0", b"batch 0")
    assert relay.lost == [(put + "HTTP/1.1", 200)] and relay.count(put) == 2
    assert relay.hidden == 1, "the 412 was not followed by a HEAD showing our write id"
    assert files.read("offsets/0") == b"batch 0"
    assert store.list_keys(bucket, "ck/offsets/_manifest/r/") == [f"ck/offsets/_manifest/r/{1:020d}"]
    with pytest.raises(Py4JJavaError) as raised:
        files.write("offsets/0", b"again")
    assert java_class(raised.value) == "org.apache.hadoop.fs.FileAlreadyExistsException"


def test_conditional_on_a_store_without_write_ids_refuses_its_own_write(spark, store, lossy):
    """What remains: without the write id a 412 cannot be told from another writer's, so the
    write fails as "already exists", though the object is whole and holds the content written
    (Spark then stops the query as if two queries wrote the checkpoint; a restart reads it)."""
    relay, bucket = lossy
    files = CheckpointFiles(spark, "conditional", store, "ck", bucket)
    files.mkdirs("offsets")
    relay.hide_write_ids = True
    put = f"PUT /{bucket}/ck/offsets/0 "
    relay.lose_response(put)
    with pytest.raises(Py4JJavaError) as raised:
        files.write("offsets/0", b"batch 0")
    assert java_class(raised.value) == "org.apache.hadoop.fs.FileAlreadyExistsException"
    assert relay.lost == [(put + "HTTP/1.1", 200)] and relay.count(put) == 2 and relay.hidden == 1
    assert files.read("offsets/0") == b"batch 0"


def test_two_writers_one_answer_lost_exactly_one_wins(spark, store, lossy):
    """A lost answer in a real race: the loser's 412 names the winner's write, not its own.

    Not on moto: its check and write of a conditional PUT are not atomic (two of six boto3
    writers racing on a fresh key both got 200 in about 1 of 1000 tries), so it cannot promise
    one winner to anyone. The sequential case (a second write after a lost answer is refused)
    runs on every store in the first test."""
    if store.racy_conditional_put:
        pytest.skip(store.racy_conditional_put)
    relay, bucket = lossy
    files = CheckpointFiles(spark, "conditional", store, "ck", bucket)
    files.mkdirs("race")
    for i in range(5):
        rel = f"race/{i}"
        relay.lose_response(f"PUT /{bucket}/ck/{rel} ")
        outcome = race(files, rel)
        winners = [w for w, result in outcome.items() if result == "won"]
        assert len(winners) == 1, f"{rel}: {outcome}"
        assert outcome[1 - winners[0]] == "org.apache.hadoop.fs.FileAlreadyExistsException"
        assert files.read(rel) == f"writer-{winners[0]}".encode()
    # The lost answer was the winner's 200 or the loser's 412: either way the store answered it.
    assert len(relay.lost) == 5 and {status for _, status in relay.lost} <= {200, 412}


CONFLICT = (b"HTTP/1.1 409 Conflict\r\nContent-Type: application/xml\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s")
CONFLICT_BODY = (b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>ConditionalRequestConflict</Code>'
                 b"<Message>A conflicting operation occurred. If using PutObject you can retry the request."
                 b"</Message><RequestId>lost-response-test</RequestId></Error>")


def test_conditional_retries_a_409_conflict_a_bounded_number_of_times(spark, store, lossy):
    """AWS answers 409 ConditionalRequestConflict while another conditional write of the key is
    in progress; moto and RGW never do, so the relay answers it in the store's place."""
    relay, bucket = lossy
    settings = {"ckptbench.conditionalPut.conflict.attempts": 3,
                "ckptbench.conditionalPut.conflict.initialDelayMs": 10}
    files = CheckpointFiles(spark, "conditional", store, "ck", bucket, settings)
    files.mkdirs("offsets")
    conflict = CONFLICT % (len(CONFLICT_BODY), CONFLICT_BODY)

    put = f"PUT /{bucket}/ck/offsets/0 "
    relay.answer_instead(put, conflict, times=2)
    files.write("offsets/0", b"batch 0")  # the third attempt reaches the store
    assert relay.count(put) == 3
    assert files.read("offsets/0") == b"batch 0"

    put = f"PUT /{bucket}/ck/offsets/1 "
    relay.answer_instead(put, conflict, times=3)
    with pytest.raises(Py4JJavaError) as raised:
        files.write("offsets/1", b"batch 1")
    assert java_class(raised.value) == "java.io.IOException"  # not "already exists": nobody won
    assert "409" in str(raised.value.java_exception.getMessage())
    assert relay.count(put) == 3
    assert not files.exists("offsets/1")
