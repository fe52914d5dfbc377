"""Typed values and default paths, without a daemon."""

from datetime import datetime, timedelta, timezone

import pytest

from folio_client import FileRef, Ref, Result, format_datetime, parse_datetime, socket_candidates
from folio_client.values import decode_line, encode_line


def test_dates_parse_rfc3339_with_up_to_nine_fraction_digits():
    assert parse_datetime("2026-12-01T09:00:00+01:00") == datetime(2026, 12, 1, 8, tzinfo=timezone.utc)
    nanos = parse_datetime("2026-12-01t09:00:00.123456789z")
    assert nanos.microsecond == 123456 and nanos.tzinfo == timezone.utc
    assert parse_datetime("2026-12-01 09:00:00.5-02:30").utcoffset() == -timedelta(hours=2, minutes=30)
    with pytest.raises(ValueError):
        parse_datetime("2026-12-01T09:00:00.1234567890Z")  # ten digits
    with pytest.raises(ValueError):
        parse_datetime("tomorrow")


def test_dates_format_as_rfc3339_and_naive_ones_are_refused():
    assert format_datetime(datetime(2026, 12, 1, 9, tzinfo=timezone.utc)) == "2026-12-01T09:00:00Z"
    tz = timezone(timedelta(hours=-3, minutes=-30))
    assert format_datetime(datetime(2026, 12, 1, 9, 0, 0, 250000, tz)) == "2026-12-01T09:00:00.250000-03:30"
    with pytest.raises(ValueError, match="naive"):
        format_datetime(datetime(2026, 12, 1))


def test_typed_values_encode_anywhere_in_a_request():
    when = datetime(2026, 12, 1, 9, tzinfo=timezone.utc)
    line = encode_line({"op": "list", "where": {"$or": [{"due": {"$gt": when}}, {"owner": Ref("User", "ann")}]},
                        "data": {"photos": [FileRef("a/b.jpg")], "parent": Result(0)}})
    assert line == (b'{"op":"list","where":{"$or":[{"due":{"$gt":{"$date":"2026-12-01T09:00:00Z"}}},'
                    b'{"owner":{"$ref":"User/ann"}}]},"data":{"photos":[{"$file":"a/b.jpg"}],'
                    b'"parent":{"$result":0}}}\n')


def test_typed_values_decode_anywhere_in_an_answer():
    message = decode_line(b'{"tag":1,"ok":true,"result":{"a":[{"$date":"2026-12-01T09:00:00Z"}],'
                          b'"b":{"$ref":"User/gone","$missing":true},"c":{"$file":"x.png","$forbidden":true},'
                          b'"d":{"$date":"0000-01-01T00:00:00Z"},"e":{"k":"\xc3\xa9"}}}')
    result = message["result"]
    assert result["a"] == [datetime(2026, 12, 1, 9, tzinfo=timezone.utc)]
    assert result["b"] == Ref("User", "gone") and result["b"].missing
    assert result["c"] == FileRef("x.png") and result["c"].forbidden
    assert result["d"] == {"$date": "0000-01-01T00:00:00Z"}  # year 0: Python has none; kept as written
    assert result["e"] == {"k": "é"}


def test_refs_parse_and_compare():
    assert Ref.parse("Task/t-1:a") == Ref("Task", "t-1:a")
    assert str(Ref("Task", "t1")) == "Task/t1"
    assert len({Ref("A", "1"), Ref("A", "1"), Ref("A", "2")}) == 2
    with pytest.raises(ValueError):
        Ref.parse("nope")


def test_default_socket_follows_the_cli():
    assert socket_candidates({"FOLIO_SOCKET": "/x.sock", "XDG_RUNTIME_DIR": "/run/user/7"}, 7) == ["/x.sock"]
    assert socket_candidates({"FOLIO_SOCKET": "", "XDG_RUNTIME_DIR": "/run/user/7"}, 7) == [
        "/run/user/7/folio/folio.sock", "/run/folio/folio.sock"]
    assert socket_candidates({}, 1000) == ["/tmp/folio-1000/folio.sock", "/run/folio/folio.sock"]
    assert socket_candidates({"XDG_RUNTIME_DIR": "/run/user/0"}, 0) == ["/run/folio/folio.sock"]
