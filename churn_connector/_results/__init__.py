"""What a send leaves behind: the SendResult users read, and the result files."""

from __future__ import annotations

from .._core import receipts_path
from .history import recorded
from .paths import check_receipts_path, check_report_path, refuse_clashes
from .result import (
    SendResult,
    append_line,
    check_result_path,
    not_read_row,
    write_frame,
    write_frames,
    write_text,
)
from .runs import (
    HEADER,
    ROWS_FORMAT,
    header_of,
    now_utc,
    read_rows_file,
    receipt_line,
    stopped_receipt,
    stored_header,
)

__all__ = [
    "HEADER",
    "ROWS_FORMAT",
    "SendResult",
    "append_line",
    "check_receipts_path",
    "check_report_path",
    "check_result_path",
    "header_of",
    "not_read_row",
    "now_utc",
    "read_rows_file",
    "receipt_line",
    "receipts_path",
    "recorded",
    "refuse_clashes",
    "stopped_receipt",
    "stored_header",
    "write_frame",
    "write_frames",
    "write_text",
]
