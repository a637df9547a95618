"""The reference wire framing: CRC, resynchronisation after garbage, limits."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tablectl.drivers.reference.framing import MAX_PAYLOAD, STX, Frame, FrameParser, crc16

FRAME = Frame(addr=1, seq=7, type=0x81, payload=b"\x02\x00\x34\x34hello")


def test_crc_is_ccitt_false() -> None:
    assert crc16(b"123456789") == 0x29B1


def test_round_trip() -> None:
    assert FrameParser().feed(FRAME.encode()) == [FRAME]


def test_frame_split_into_single_bytes() -> None:
    parser = FrameParser()
    out: list[Frame] = []
    for byte in FRAME.encode():
        out += parser.feed(bytes([byte]))
    assert out == [FRAME]


def test_garbage_around_frames_is_dropped_and_counted() -> None:
    parser = FrameParser()
    garbage = b"\xff\x00zz\x02"
    frames = parser.feed(garbage + FRAME.encode() + garbage + FRAME.encode())
    assert frames == [FRAME, FRAME]
    assert parser.counters.bytes_dropped == 2 * len(garbage)


def test_false_header_hiding_frames_is_abandoned_when_the_line_goes_quiet() -> None:
    parser = FrameParser()
    false_header = bytes([STX, 1, 1, 0x7A, 0x7A, 0x00, 0x01])  # claims 256 bytes follow
    assert parser.feed(false_header + FRAME.encode() + FRAME.encode(), now_ms=0) == []
    assert parser.feed(b"", now_ms=100) == [FRAME, FRAME]
    assert parser.counters.gap_aborts == 1


def test_corrupt_crc_is_rejected_and_the_next_frame_still_found() -> None:
    parser = FrameParser()
    bad = bytearray(FRAME.encode())
    bad[-1] ^= 0x55
    assert parser.feed(bytes(bad) + FRAME.encode()) == [FRAME]
    assert parser.counters.bad_crc == 1


def test_length_over_the_limit_is_a_bad_header() -> None:
    parser = FrameParser()
    header = bytes([STX, 1, 1, 1, 1]) + (MAX_PAYLOAD + 1).to_bytes(2, "little")
    assert parser.feed(header + FRAME.encode()) == [FRAME]
    assert parser.counters.bad_header >= 1


def test_wrong_version_is_a_bad_header() -> None:
    parser = FrameParser()
    wire = bytearray(FRAME.encode())
    wire[1] = 9
    assert parser.feed(bytes(wire)) == []
    assert parser.counters.bad_header >= 1


def test_silence_mid_frame_aborts_it() -> None:
    parser = FrameParser()
    wire = FRAME.encode()
    assert parser.feed(wire[:5], now_ms=1000) == []
    # The rest arrives 60 ms later: the partial frame was abandoned, so it never decodes.
    assert parser.feed(wire[5:], now_ms=1060) == []
    assert parser.counters.gap_aborts == 1
    assert parser.feed(wire, now_ms=1070) == [FRAME]


@given(
    st.lists(
        st.tuples(
            st.binary(max_size=40),
            st.builds(
                Frame,
                st.integers(0, 255),
                st.integers(0, 255),
                st.integers(0, 255),
                st.binary(max_size=64),
            ),
        ),
        max_size=8,
    ),
    st.integers(1, 17),
)
def test_every_frame_survives_interleaved_noise(
    chunks: list[tuple[bytes, Frame]], split: int
) -> None:
    wire = b"".join(noise + frame.encode() for noise, frame in chunks)
    parser = FrameParser()
    got: list[Frame] = []
    for i in range(0, len(wire), split):
        got += parser.feed(wire[i : i + split], now_ms=0)
    got += parser.feed(b"", now_ms=1000)  # the line goes quiet
    # Noise may hide a frame only by forming a false one with a valid CRC; every real frame
    # must still come out, in order.
    it = iter(got)
    assert all(any(g == frame for g in it) for _, frame in chunks)
