"""What bench/pipelined_gets.py and bench/pipelined_creates.py share: one connection to foliod on
which a batch of request lines is sent at once and every answer read and checked."""
import json
import socket


def connect(path: str, name: str):
    """Returns exchange(lines): sends the lines, reads one answer per line, exits if any failed."""
    connection = socket.socket(socket.AF_UNIX)
    connection.connect(path)
    answers = connection.makefile("rb")

    def exchange(lines: list[bytes]) -> None:
        connection.sendall(b"".join(line + b"\n" for line in lines))
        for _ in lines:
            answer = json.loads(answers.readline())
            if not answer.get("ok"):
                raise SystemExit(f"{name}: {answer}")

    return exchange
