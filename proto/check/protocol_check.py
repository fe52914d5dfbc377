#!/usr/bin/env python3
"""Checks that PROTOCOL.md, proto/schema and foliod agree (proto/examples/README.md).

    protocol_check.py replay [FILE.jsonl ...]   replay proto/examples against a real foliod
    protocol_check.py validate-log DIR          validate the wire logs in DIR ($FOLIO_WIRE_LOG)
    protocol_check.py validate-doc [PROTOCOL.md] validate the document's →/← examples
    protocol_check.py schema-cases              instances only the schema sees (live queries, refusals)

Exit status 0 when everything matched, 1 on a mismatch, 2 on a usage error.
Needs Python 3.9+ and jsonschema (4.18 or later, which brings referencing).
"""

import argparse
import base64
import json
import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from urllib.parse import urljoin

from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from referencing import Registry, Resource

PROTO = Path(__file__).resolve().parent.parent
SCHEMA_DIR = PROTO / "schema"
EXAMPLES_DIR = PROTO / "examples"
BASE = "https://folio.invalid/proto/schema/"


# MARK: Schemas


class Schemas:
    """The documents of proto/schema, each checked against the 2020-12 meta-schema, and validators by name."""

    def __init__(self, directory=SCHEMA_DIR):
        resources = []
        for path in sorted(directory.glob("*.json")):
            document = json.loads(path.read_text())
            Draft202012Validator.check_schema(document)
            if document.get("$id") != BASE + path.name:
                raise SystemExit(f"{path}: $id must be {BASE + path.name}")
            resources.append((document["$id"], Resource.from_contents(document)))
        self.registry = Registry().with_resources(resources)
        self._validators = {}
        self.ops = set(self.resolve("request.json")["properties"]["op"]["enum"])

    def resolve(self, name):
        return self.registry.contents(BASE + name)

    def validator(self, reference):
        if reference not in self._validators:
            self._validators[reference] = Draft202012Validator(self.inlined(BASE + reference), registry=self.registry)
        return self._validators[reference]

    def inlined(self, uri, stack=()):
        """The schema at uri with every $ref replaced by its target, except where it recurses (a value in
        a value), which keeps its absolute URI. Same meaning ($ref beside other keywords is an allOf),
        and jsonschema validates it several times faster than by resolving each $ref as it goes."""
        document, _, pointer = uri.partition("#")
        schema = self.registry.contents(document)
        for part in filter(None, pointer.split("/")):
            schema = schema[part.replace("~1", "/").replace("~0", "~")]
        return self._inline(schema, document, stack + (uri,))

    def _inline(self, schema, base, stack):
        if isinstance(schema, list):
            return [self._inline(item, base, stack) for item in schema]
        if not isinstance(schema, dict):
            return schema
        copy = {key: self._inline(value, base, stack) for key, value in schema.items()
                if key not in ("$ref", "$id", "$schema", "$defs")}
        reference = schema.get("$ref")
        if not isinstance(reference, str):  # a property named "$ref" (of {"$ref": "Task/t1"}) is not a reference
            if "$ref" in schema:
                copy["$ref"] = self._inline(reference, base, stack)
            return copy
        target = urljoin(base, reference)
        if "#" not in target:
            target += "#"
        inlined = {"$ref": target} if target in stack else self.inlined(target, stack)
        if not copy:
            return inlined
        copy.setdefault("allOf", []).append(inlined)
        return copy

    def problem(self, reference, instance):
        """None if instance validates against the schema at reference, else the most telling error."""
        error = best_match(self.validator(reference).iter_errors(instance))
        if error is None:
            return None
        where = "/".join(str(part) for part in error.absolute_path)
        return f"{error.message[:300]} (at /{where}; schema {'/'.join(str(p) for p in error.absolute_schema_path)[-160:]})"

    # Validating is slow (jsonschema descends through every if of request.json's 35 ops, every anyOf
    # branch of a result), and a wire log holds tens of thousands of lines, so these check the part of
    # the schema that applies (an op's fields; a success's envelope and its op's result), which the
    # schema makes equivalent, and ask the whole schema only for the message of a line that fails.
    def request(self, instance):
        tag = instance.get("tag") if isinstance(instance, dict) else None
        if isinstance(instance, dict) and isinstance(instance.get("op"), str) and instance["op"] in self.ops \
                and not isinstance(tag, bool) and isinstance(tag, (str, int, float, type(None))):
            if self.validator(f"request.json#/$defs/ops/{instance['op']}").is_valid(instance):
                return None
        return self.problem("request.json", instance)

    def line(self, instance, op=None):
        """With op, the op of the request a success answers: its result is checked against that op's."""
        if isinstance(instance, dict):
            if instance.get("ok") is True and op in self.ops:
                if self.validator("response.json#/$defs/successEnvelope").is_valid(instance):
                    return self.result(op, instance["result"])
            elif instance.get("ok") is False:
                if self.validator("response.json#/$defs/failure").is_valid(instance):
                    return None
            elif "event" in instance:
                if self.validator("stream.json#/$defs/eventLine").is_valid(instance):
                    return None
            elif "change" in instance:
                if self.validator("stream.json#/$defs/changeLine").is_valid(instance):
                    return None
        return self.problem("line.json", instance)

    def result(self, op, instance):
        """The op's own result schema, for a success whose request is known."""
        if not isinstance(op, str) or op not in self.ops or self.validator(f"response.json#/$defs/results/{op}").is_valid(instance):
            return None
        return self.problem(f"response.json#/$defs/results/{op}", instance)


def is_stream_line(line):
    """A line that answers no request: an event or change line, or the error that ends a watch."""
    if not isinstance(line, dict):
        return False
    if "event" in line or "change" in line:
        return True
    error = line.get("error")
    return line.get("ok") is False and isinstance(error, dict) and "lastSeq" in error and "tag" in line


def closes_connection(line):
    """A tagless error after which foliod reads no more of the connection (§1)."""
    error = line.get("error") if isinstance(line, dict) else None
    if "tag" in line or not isinstance(error, dict):
        return False
    message = error.get("message", "")
    return error.get("code") == "too_large" or any(
        words in message for words in ("closing the connection", "try again later", "has no role"))


# MARK: Matching expected values, with placeholders

KINDS = {
    "any": lambda v: True,
    "string": lambda v: isinstance(v, str),
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "bool": lambda v: isinstance(v, bool),
    "time": lambda v: isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", v) is not None,
    "id": lambda v: isinstance(v, str) and re.fullmatch(r"[0-9A-HJKMNP-TV-Z]{26}", v) is not None,
    "hash": lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{64}", v) is not None,
    "cursor": lambda v: isinstance(v, str) and re.fullmatch(r"[A-Za-z0-9_-]+", v) is not None,
}
PLACEHOLDER = re.compile(r"\$(" + "|".join(KINDS) + r")(?::([A-Za-z0-9_]+))?")
REFERENCE = re.compile(r"\$\{([A-Za-z0-9_]+)\}")


class Bindings:
    """What placeholders captured in one examples file, and the daemon's data directory ($DATA)."""

    def __init__(self, data_directory):
        self.values = {"DATA": data_directory}

    def expand(self, value, escape=lambda text: text):
        """A request (or an expected string) with ${name} and $kind:name replaced by what was captured."""
        if isinstance(value, dict):
            return {key: self.expand(item, escape) for key, item in value.items()}
        if isinstance(value, list):
            return [self.expand(item, escape) for item in value]
        if not isinstance(value, str):
            return value
        whole = PLACEHOLDER.fullmatch(value)
        if whole and whole.group(2):
            if whole.group(2) not in self.values:
                raise Mismatch(f"{value}: nothing captured as {whole.group(2)!r} yet")
            return self.values[whole.group(2)]
        value = value.replace("$DATA", escape(self.values["DATA"]))

        def substitute(match):
            if match.group(1) not in self.values:
                raise Mismatch(f"${{{match.group(1)}}}: nothing captured yet")
            return escape(str(self.values[match.group(1)]))

        return REFERENCE.sub(substitute, value)


class Mismatch(Exception):
    pass


def describe(value):
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 200 else text[:200] + "…"


def match(expected, actual, bindings, path="$"):
    """Raises Mismatch where actual differs from expected. Key order counts: the server's is documented."""
    if isinstance(expected, str):
        placeholder = PLACEHOLDER.fullmatch(expected)
        if placeholder:
            kind, name = placeholder.groups()
            if not KINDS[kind](actual):
                raise Mismatch(f"{path}: expected {expected}, got {describe(actual)}")
            if name:
                if name in bindings.values and bindings.values[name] != actual:
                    raise Mismatch(f"{path}: {expected} was {describe(bindings.values[name])}, now {describe(actual)}")
                bindings.values[name] = actual
            return
        if expected.startswith("$re:"):
            pattern = bindings.expand(expected[4:], escape=re.escape)
            if not isinstance(actual, str) or re.fullmatch(pattern, actual, re.S) is None:
                raise Mismatch(f"{path}: expected a match of {pattern!r}, got {describe(actual)}")
            return
        expected = bindings.expand(expected)
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            raise Mismatch(f"{path}: expected an object, got {describe(actual)}")
        if list(expected) != list(actual):
            missing = [key for key in expected if key not in actual]
            extra = [key for key in actual if key not in expected]
            if missing or extra:
                raise Mismatch(f"{path}: keys differ: missing {missing}, unexpected {extra}: got {describe(actual)}")
            raise Mismatch(f"{path}: keys in another order: expected {list(expected)}, got {list(actual)}")
        for key in expected:
            match(expected[key], actual[key], bindings, f"{path}.{key}")
        return
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            raise Mismatch(f"{path}: expected {len(expected)} elements, got {describe(actual)}")
        for index, (item, other) in enumerate(zip(expected, actual)):
            match(item, other, bindings, f"{path}[{index}]")
        return
    if type(expected) is not type(actual) or expected != actual:
        raise Mismatch(f"{path}: expected {describe(expected)}, got {describe(actual)}")


# MARK: Replay


class Daemon:
    """A real foliod on a temporary data directory, stopped and removed by close() whatever happened."""

    def __init__(self, binary, arguments):
        self.directory = tempfile.mkdtemp(prefix="folio-replay.")
        self.data = os.path.join(self.directory, "data")
        self.socket_path = os.path.join(self.directory, "folio.sock")
        config = os.path.join(self.directory, "foliod.conf")
        Path(config).write_text("")
        self.log = open(os.path.join(self.directory, "foliod.log"), "w+")
        self.process = subprocess.Popen(
            [binary, "--config", config, "--data", self.data, "--socket", self.socket_path, *arguments],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            self.wait_until_serving()
        except BaseException:
            self.close()
            raise

    def wait_until_serving(self):
        deadline = time.monotonic() + 20
        while True:
            if self.process.poll() is not None:
                raise Mismatch(f"foliod exited with status {self.process.returncode}: {self.log_tail()}")
            try:
                probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                probe.connect(self.socket_path)
                probe.close()
                return
            except OSError:
                probe.close()
                if time.monotonic() > deadline:
                    raise Mismatch(f"foliod did not accept connections within 20 s: {self.log_tail()}")
                time.sleep(0.02)

    def log_tail(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()[-2000:]

    def close(self):
        try:
            if self.process.poll() is None:
                self.process.terminate()
                try:
                    self.process.wait(10)
                except subprocess.TimeoutExpired:
                    self.process.kill()
                    self.process.wait()
        finally:
            self.log.close()
            shutil.rmtree(self.directory, ignore_errors=True)


class Client:
    """One connection: lines out, lines in; stream lines set aside until an example asks for them."""

    def __init__(self, path, timeout=15):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buffer = b""
        self.streamed = []

    def send(self, data):
        self.sock.sendall(data)

    def read_line(self):
        """The next line's bytes, or None at the end of the stream."""
        while b"\n" not in self.buffer:
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                raise Mismatch("no line from foliod within 15 s") from None
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                if self.buffer:
                    raise Mismatch(f"the stream ended inside a line: {self.buffer[:200]!r}")
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def read_json(self):
        line = self.read_line()
        if line is None:
            return None
        try:
            return json.loads(line)
        except ValueError as error:
            raise Mismatch(f"foliod sent a line that is not JSON ({error}): {line[:200]!r}") from None

    def read_response(self):
        while True:
            line = self.read_json()
            if line is None:
                raise Mismatch("foliod closed the connection instead of answering")
            if is_stream_line(line):
                self.streamed.append(line)
            else:
                return line

    def read_stream_line(self):
        if self.streamed:
            return self.streamed.pop(0)
        line = self.read_json()
        if line is None:
            raise Mismatch("foliod closed the connection before the expected stream line")
        if not is_stream_line(line):
            raise Mismatch(f"expected a stream line, got a response: {describe(line)}")
        return line

    def close(self):
        self.sock.close()


class Tally:
    def __init__(self):
        self.counts = {}
        self.failures = []

    def count(self, what, number=1):
        self.counts[what] = self.counts.get(what, 0) + number

    def fail(self, where, message):
        self.failures.append(f"{where}: {message}")

    def report(self, title):
        print(f"{title}: " + ", ".join(f"{number} {what}" for what, number in self.counts.items()))
        for failure in self.failures:
            print("  FAIL " + failure)
        return not self.failures


STEP_KEYS = {"comment", "connection", "request", "raw", "end", "response", "stream", "closed", "invalid"}


def generalize(value, data_directory, op=None, key=None):
    """What --record writes for a received value: placeholders where a fresh daemon answers differently."""
    if isinstance(value, dict):
        if key == "by" and "uid" in value:
            return {name: "$int" for name in value}
        if key in ("lmdb", "watchDelivery"):
            return {name: "$int" for name in value}
        return {name: generalize(item, data_directory, op, name) for name, item in value.items()}
    if isinstance(value, list):
        return [generalize(item, data_directory, op, key) for item in value]
    if isinstance(value, str):
        if key in ("createdAt", "updatedAt", "at") and KINDS["time"](value):
            return "$time"
        if key in ("hash", "chainHead", "digest") and value != "0" * 64:
            return "$hash"
        if key == "next" and op in ("list", "links", "backlinks"):
            return "$cursor"
        if key in ("id", "name") and KINDS["id"](value):
            return "$id"
        if key == "upload" or (key == "text" and op == "metrics"):
            return "$string"
        return value.replace(data_directory, "$DATA")
    if key in ("micros", "uid", "pid", "uploader", "clientMemory", "uptimeSeconds"):
        return "$number" if key == "uptimeSeconds" else "$int"
    return value


STEP_ORDER = ["comment", "connection", "request", "raw", "end", "invalid", "response", "stream", "closed"]


def replay_file(path, binary, schemas, tally, record=False):
    """Runs one examples file against a fresh foliod; with record, fills in the responses it lacks."""
    steps = []
    arguments = []
    for number, text in enumerate(path.read_text().split("\n"), 1):
        if not text.strip():
            continue
        try:
            step = json.loads(text)
        except ValueError as error:
            tally.fail(f"{path.name}:{number}", f"not JSON: {error}")
            return
        if number == 1 and "foliod" in step:
            arguments = step["foliod"]
            continue
        unknown = set(step) - STEP_KEYS
        if unknown:
            tally.fail(f"{path.name}:{number}", f"unknown keys {sorted(unknown)}")
            return
        steps.append((number, step))
    header = [json.loads(text) for text in path.read_text().split("\n")[:1] if '"foliod"' in text]
    try:
        daemon = Daemon(binary, arguments)
    except Mismatch as mismatch:
        tally.fail(path.name, str(mismatch))
        return
    clients = {}
    try:
        bindings = Bindings(daemon.data)
        for number, step in steps:
            where = f"{path.name}:{number}"
            try:
                replay_step(step, clients, daemon, bindings, schemas, tally, where, record)
            except Mismatch as mismatch:
                tally.fail(where, str(mismatch))
                return
        if record:
            lines = [json.dumps(line, ensure_ascii=False, separators=(",", ":")) for line in header]
            for _, step in steps:
                ordered = {key: step[key] for key in STEP_ORDER if key in step}
                lines.append(json.dumps(ordered, ensure_ascii=False, separators=(",", ":")))
            path.write_text("\n".join(lines) + "\n")
    finally:
        for client in clients.values():
            client.close()
        daemon.close()


def replay_step(step, clients, daemon, bindings, schemas, tally, where, record=False):
    if set(step) <= {"comment"}:
        return
    name = step.get("connection", 1)
    if name not in clients:
        clients[name] = Client(daemon.socket_path)
    client = clients[name]
    request = None
    if "request" in step:
        request = bindings.expand(step["request"])
        client.send(json.dumps(request, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    elif "raw" in step:
        text = bindings.expand(step["raw"])
        client.send(text.encode() + (b"" if step.get("end") else b"\n"))
    if step.get("end"):
        client.sock.shutdown(socket.SHUT_WR)
    actual = None
    if record and "response" not in step and ("request" in step or "raw" in step) and not step.get("closed"):
        op = request.get("op") if isinstance(request, dict) else None
        actual = client.read_response()
        step["response"] = generalize(actual, daemon.data, op)
        result = step["response"].get("result")
        name = re.sub(r"[^A-Za-z0-9_]", "_", str(actual.get("tag", "")))
        if name and isinstance(result, dict):
            # Captured by the request's tag, for later requests to use: "$cursor:l1" is l1's next.
            for key in ("next", "id", "name", "upload"):
                if isinstance(result.get(key), str) and PLACEHOLDER.fullmatch(result[key]):
                    result[key] += ":" + name
        match(step["response"], actual, bindings)
        if isinstance(step.get("stream"), int):
            step["stream"] = [generalize(client.read_stream_line(), daemon.data) for _ in range(step["stream"])]
        return
    if "response" in step:
        actual = client.read_response()
        tally.count("responses")
        match(step["response"], actual, bindings)
        problem = schemas.line(actual)
        if problem:
            raise Mismatch(f"the response does not validate against line.json: {problem}")
        op = request.get("op") if isinstance(request, dict) else None
        if actual.get("ok") is True and op:
            problem = schemas.result(op, actual["result"])
            if problem:
                raise Mismatch(f"the result does not validate against results/{op}: {problem}")
    for expected in step.get("stream", []):
        line = client.read_stream_line()
        tally.count("stream lines")
        match(expected, line, bindings)
        problem = schemas.line(line)
        if problem:
            raise Mismatch(f"the stream line does not validate against line.json: {problem}")
    if request is not None:
        problem = schemas.request(request)
        if problem and actual is not None and actual.get("ok") is True:
            raise Mismatch(f"foliod accepted a request the schema refuses: {problem}")
        if step.get("invalid"):
            if problem is None:
                raise Mismatch("the request schema accepts a request this example marks invalid")
            tally.count("requests the schema refuses, as marked")
        elif problem:
            raise Mismatch(f"the request does not validate against request.json: {problem}")
        else:
            tally.count("requests")
    if step.get("closed"):
        line = client.read_json()
        if line is not None:
            raise Mismatch(f"expected foliod to close the connection, got {describe(line)}")


def command_replay(arguments, schemas):
    binary = os.environ.get("FOLIOD") or ".build/debug/foliod"
    if not os.access(binary, os.X_OK):
        print(f"replay: no foliod at {binary} (set FOLIOD, or build it: swift build --product foliod)", file=sys.stderr)
        return 2
    files = [Path(name) for name in arguments.files] or sorted(EXAMPLES_DIR.glob("*.jsonl"))
    tally = Tally()
    covered = set()
    for path in files:
        covered.add(path.stem)
        replay_file(path, binary, schemas, tally, arguments.record)
        tally.count("files")
    if not arguments.files:
        for op in sorted(schemas.ops - covered):
            tally.fail("proto/examples", f"no examples file for op {op} ({op}.jsonl)")
    return 0 if tally.report("replay") else 1


# MARK: Wire logs


class WireConnection:
    """One connection of a wire log, read as it goes: the request lines sent and not yet answered."""

    def __init__(self):
        self.unsent = b""
        self.requests = []
        self.closed = False

    def sent(self, data):
        """Frames the bytes sent as foliod does (§1): lines end with \n, a \r before it is dropped."""
        lines = (self.unsent + data).split(b"\n")
        self.unsent = lines.pop()
        self.requests.extend(line[:-1] if line.endswith(b"\r") else line for line in lines)

    def next_request(self):
        """The oldest unanswered request line; a last line without \n counts once the client stopped sending."""
        if self.requests:
            return self.requests.pop(0)
        if self.unsent:
            line, self.unsent = self.unsent, b""
            return line
        return None


# Times, hashes and generated ids, quoted: what makes most lines of a log differ. Each is replaced by
# a value of its own kind, which every schema constraint on it accepts alike, so that lines that
# differ only in them are validated once.
VARYING = re.compile(r'"(?:(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)|([0-9a-f]{64})|([0-9A-HJKMNP-TV-Z]{26}))"')
SAMPLES = {1: '"2000-01-01T00:00:00.000Z"', 2: '"' + "0" * 64 + '"', 3: '"' + "0" * 26 + '"'}


class ValidatedLines:
    """The shapes of lines already found valid, by the op they answer."""

    def __init__(self, schemas):
        self.schemas = schemas
        self.valid = set()

    def problem(self, text, line, op):
        key = (op, VARYING.sub(lambda found: SAMPLES[found.lastindex], text))
        if key in self.valid:
            return None
        problem = self.schemas.line(line, op)
        if problem is None:
            self.valid.add(key)
        return problem

    def request_problem(self, raw, request):
        key = ("request", VARYING.sub(lambda found: SAMPLES[found.lastindex], raw.decode(errors="replace")))
        if key in self.valid:
            return None
        problem = self.schemas.request(request)
        if problem is None:
            self.valid.add(key)
        return problem


def command_validate_log(arguments, schemas):
    directory = Path(arguments.directory)
    tally = Tally()
    logs = sorted(directory.glob("*.log")) if directory.is_dir() else []
    if not logs:
        print(f"validate-log: no wire logs in {directory}", file=sys.stderr)
        return 2
    # Connections are independent: each of `jobs` processes reads every log and checks its share of them.
    # The processes are forked, so they have the schemas (which do not pickle) from here.
    global FORKED_SCHEMAS
    FORKED_SCHEMAS = schemas
    jobs = max(1, arguments.jobs or os.cpu_count() or 1)
    shares = run_forked(validate_logs, [(logs, jobs, share) for share in range(jobs)])
    for counts, failures in shares:
        for what, number in counts.items():
            tally.count(what, number)
        tally.failures.extend(failures)
    tally.counts["logs"] = len(logs)
    tally.failures.sort(key=lambda failure: (failure.split(":")[0], int(failure.split(":")[1])) if failure.count(":") > 1 else (failure, 0))
    return 0 if tally.report("validate-log") else 1


FORKED_SCHEMAS = None


def run_forked(function, argument_lists):
    """function(*arguments) for each list, each in a child forked from here (so it has what this process
    has, the schemas included), their results in order. A plain fork and a pipe per child, nothing
    shared: a child that ends without a result is an error here, not a wait forever. (With a
    multiprocessing.Pool, a run once hung in validate-log: one worker had exited, the other waited on
    a lock of the pool's queues, and the pool on it.)"""
    sys.stdout.flush()
    sys.stderr.flush()
    children = []
    for arguments in argument_lists:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(read_end)
            status = 0
            try:
                data = pickle.dumps(("ok", function(*arguments)))
            except BaseException as error:  # reported by the parent; the child only ends
                data = pickle.dumps(("error", f"{type(error).__name__}: {error}"))
                status = 1
            try:
                with os.fdopen(write_end, "wb") as out:
                    out.write(data)
            finally:
                os._exit(status)
        os.close(write_end)
        children.append((pid, read_end))
    results, problems = [], []
    for pid, read_end in children:
        with os.fdopen(read_end, "rb") as source:
            data = source.read()
        _, status = os.waitpid(pid, 0)
        if not data:
            problems.append(f"worker {pid} ended without a result (wait status {status})")
            continue
        kind, value = pickle.loads(data)
        if kind == "ok":
            results.append(value)
        else:
            problems.append(f"worker {pid} failed: {value}")
    if problems:
        raise RuntimeError("; ".join(problems))
    return results


def validate_logs(logs, jobs, share):
    tally = Tally()
    validated = ValidatedLines(FORKED_SCHEMAS)
    for path in logs:
        validate_log(path, validated, tally, lambda name: zlib.crc32(name) % jobs == share)
    return tally.counts, tally.failures


WIRE_RECORD = re.compile(rb"(\d+)([<>]) (.*)\n", re.S)


def validate_log(path, validated, tally, mine):
    """A log of TestConnection, read a line at a time (logs are large): '<connection>> <base64 of bytes sent>'
    and '<connection>< <line received>'. Every line received must validate, a success also against the
    result of the op it answers; a request foliod answered ok must validate. Responses answer requests in
    order on each connection; once foliod closes it (too_large, a slow line), the rest is unanswered."""
    connections = {}
    with open(path, "rb") as log:
        # Split on \n only: a line foliod sends may hold U+2028, which str.splitlines() splits on.
        for number, record in enumerate(log, 1):
            where = f"{path.name}:{number}"
            found = WIRE_RECORD.fullmatch(record)
            if not found:
                tally.fail(where, "not a wire log line")
                return
            name, direction, payload = found.groups()
            if not mine(name):
                continue
            connection = connections.setdefault(name, WireConnection())
            if direction == b">":
                connection.sent(base64.b64decode(payload))
                continue
            text = payload.decode(errors="replace")
            try:
                line = json.loads(text)
            except ValueError as error:
                tally.fail(where, f"foliod sent a line that is not JSON: {error}")
                continue
            tally.count("lines received")
            op = None
            if not is_stream_line(line) and not connection.closed:
                if closes_connection(line):
                    connection.closed = True
                else:
                    op = check_request(connection.next_request(), line, where, validated, tally)
            problem = validated.problem(text, line, op)
            if problem:
                tally.fail(where, f"{problem}: {describe(line)}")
    tally.count("requests not answered in the log", sum(len(c.requests) + bool(c.unsent) for c in connections.values()))


def check_request(raw, response, where, validated, tally):
    """The op of a request answered ok (which must validate), for its result to be checked against."""
    if raw is None:
        tally.count("responses without a request in the log")
        return None
    try:
        request = json.loads(raw)
    except (ValueError, RecursionError):  # tests send nesting far deeper than foliod's 128 levels
        request = None
    try:
        problem = validated.request_problem(raw, request) if request is not None else "not JSON"
    except RecursionError:
        problem = "nested too deep to validate"
    if response.get("ok") is not True:
        tally.count("requests answered with an error" if problem is None else "requests refused by both schema and server")
        return None
    tally.count("requests answered ok")
    if problem:
        tally.fail(where, f"answered ok, but the request does not validate: {problem}: {raw[:200]!r}")
        return None
    return request["op"]


# MARK: PROTOCOL.md's examples


def document_examples(path):
    """The →/← lines of each ```text block: (line number, direction, JSON), skipping cut (…) and prose lines."""
    blocks = []
    block = None
    for number, text in enumerate(path.read_text().split("\n"), 1):
        if text.startswith("```"):
            block = [] if block is None and text.strip() == "```text" else None
            if block is not None:
                blocks.append(block)
            continue
        if block is not None and text.startswith('{"seq":') and "…" not in text:
            block.append((number, "event", json.loads(text)))  # §7's events, as export writes them
            continue
        if block is None or not text.startswith(("→ ", "← ")):
            continue
        body = text[2:]
        if "…" in body or not body.startswith("{"):
            continue
        try:
            value, _ = json.JSONDecoder().raw_decode(body)
        except ValueError as error:
            block.append((number, "!", str(error)))
            continue
        block.append((number, text[0], value))
    return blocks


KNOWN_DISAGREEMENTS = Path(__file__).resolve().parent / "doc-disagreements.json"


def command_validate_doc(arguments, schemas):
    """Each failure on a line that doc-disagreements.json lists is reported as known, not failed, until the
    document is fixed; an entry that no longer matches a failing line fails, so the list cannot go stale."""
    path = Path(arguments.document)
    found = Tally()
    validate_document(path, schemas, found)
    text = path.read_text().split("\n")
    known = json.loads(KNOWN_DISAGREEMENTS.read_text()) if KNOWN_DISAGREEMENTS.exists() else []
    # The op table of §5 must list every op of the schema (and so of foliod, whose unknown_op message,
    # replayed in envelope.jsonl, lists them all).
    section = text.index("## 5. Operations")
    table = set(re.findall(r"^\| `([a-z.]+)` \|", "\n".join(text[section:text.index("### 5.1 hello")]), re.M))
    for op in sorted(schemas.ops - table):
        found.fail(f"{path.name}:{section + 1}", f"the op table of §5 does not list op {op}")
    for op in sorted(table - schemas.ops):
        found.fail(f"{path.name}:{section + 1}", f"the op table of §5 lists op {op}, which the schema does not have")
    used = set()
    tally = Tally()
    tally.counts = found.counts
    for failure in found.failures:
        number = int(failure.split(":", 2)[1])
        hits = [index for index, entry in enumerate(known)
                if ("line" in entry and entry["line"] in text[number - 1]) or ("op" in entry and f"op {entry['op']}" in failure)]
        if hits:
            used.update(hits)
            tally.count("known disagreements")
        else:
            tally.failures.append(failure)
    for index, entry in enumerate(known):
        if index not in used:
            tally.fail(KNOWN_DISAGREEMENTS.name, f"{entry.get('line') or entry.get('op')!r} no longer fails: remove its entry")
        else:
            print(f"known: {entry.get('line') or entry.get('op')}: {entry['why']}")
    return 0 if tally.report("validate-doc") else 1


def validate_document(path, schemas, tally):
    for block in document_examples(path):
        requests = [(number, value) for number, direction, value in block if direction == "→"]
        responses = [(number, value) for number, direction, value in block if direction == "←"]
        for number, direction, value in block:
            if direction == "!":
                tally.fail(f"{path.name}:{number}", f"not JSON: {value}")
            elif direction == "event":
                tally.count("events")
                problem = schemas.problem("event.json", value)
                if problem:
                    tally.fail(f"{path.name}:{number}", problem)
        for number, response in responses:
            tally.count("responses")
            problem = schemas.line(response)
            if problem:
                tally.fail(f"{path.name}:{number}", problem)
        answers = pair_document_block(requests, responses)
        for number, request in requests:
            answer_number, response = answers.get(number, (None, None))
            problem = schemas.request(request)
            if response is not None and response.get("ok") is False:
                tally.count("requests answered with an error" if problem is None else "requests refused by both schema and server")
                continue
            tally.count("requests")
            if problem:
                tally.fail(f"{path.name}:{number}", f"the request does not validate: {problem}")
            elif response is not None and isinstance(request, dict):
                problem = schemas.result(request.get("op"), response.get("result"))
                if problem:
                    op = request.get("op")
                    tally.fail(f"{path.name}:{answer_number}", f"the result does not validate against results/{op}: {problem}")


def pair_document_block(requests, responses):
    """Each request's answer in a block of the document, (line number, response): the response with its
    tag, else the next untagged one."""
    answers = {}
    remaining = [(number, response) for number, response in responses if not is_stream_line(response)]
    for number, request in requests:
        if not isinstance(request, dict):
            continue
        tag = request.get("tag")
        for index, (_, response) in enumerate(remaining):
            untagged = tag is None and "tag" not in response and not closes_connection(response)
            if untagged or (tag is not None and response.get("tag") == tag):
                answers[number] = remaining.pop(index)
                break
    return answers


def command_schema_cases(arguments, schemas):
    """schema-cases.jsonl: instances no replay can produce (live queries, another uid's refusals), each with
    whether the schema must accept it."""
    tally = Tally()
    path = Path(__file__).resolve().parent / "schema-cases.jsonl"
    for number, text in enumerate(path.read_text().split("\n"), 1):
        case = json.loads(text) if text.strip() else {}
        if "schema" not in case:
            continue
        tally.count("cases")
        problem = schemas.problem(case["schema"], case["instance"])
        if case["valid"] and problem:
            tally.fail(f"{path.name}:{number}", f"{case['schema']} refuses it: {problem}")
        elif not case["valid"] and problem is None:
            tally.fail(f"{path.name}:{number}", f"{case['schema']} accepts it")
    return 0 if tally.report("schema-cases") else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    replay = commands.add_parser("replay", help="replay proto/examples against foliod ($FOLIOD, else .build/debug/foliod)")
    replay.add_argument("--record", action="store_true", help="write the responses an examples line lacks (review them!)")
    replay.add_argument("files", nargs="*", help="examples files (default: every proto/examples/*.jsonl)")
    log = commands.add_parser("validate-log", help="validate the wire logs of a FOLIO_WIRE_LOG directory")
    log.add_argument("--jobs", type=int, default=0, help="processes (default: one per CPU)")
    log.add_argument("directory")
    doc = commands.add_parser("validate-doc", help="validate PROTOCOL.md's →/← examples")
    doc.add_argument("document", nargs="?", default=str(PROTO / "PROTOCOL.md"))
    commands.add_parser("schema-cases", help="check proto/check/schema-cases.jsonl against the schema")
    arguments = parser.parse_args()
    # foliod takes 128 levels of nesting; jsonschema descends several frames for each.
    sys.setrecursionlimit(5000)
    # SIGTERM unwinds like Ctrl-C, so that a daemon started by replay is stopped and its directory removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    schemas = Schemas()
    command = {
        "replay": command_replay, "validate-log": command_validate_log, "validate-doc": command_validate_doc,
        "schema-cases": command_schema_cases,
    }[arguments.command]
    sys.exit(command(arguments, schemas))


if __name__ == "__main__":
    main()
