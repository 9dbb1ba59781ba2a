"""`make collect`: submissions from a Canvas "Download Submissions" zip into submitted/, through
nbgrader's ``zip_collect`` (its extractor and collector plug-ins are configured in nbgrader_config.py).

Put the zip (or several) in ``downloaded/<assignment>/archive/`` and run ``make collect``. Canvas
names each file ``<lastfirst>_[LATE_]<canvas user id>_<submission id>_<file name>``, where the file
name is what the student uploaded, with ``-1``, ``-2`` … appended by Canvas to a resubmitted file
(browsers add `` (1)``). This module:

- ``TimedExtractor`` unpacks every archive, keeping each entry's time (the zip's record of when the
  file was submitted; read in ``zip_timezone``, UTC by default);
- ``CanvasCollector`` reads each name: the student (the roster's id for that Canvas user id, from
  ``make roster``; the Canvas id itself when the roster does not know it, with a warning), the
  notebook (the uploaded name without the resubmission suffix) and the time. Of several files for
  the same notebook, the newest resubmission wins (the highest suffix, then the latest time); the
  others are skipped and logged. Canvas's LATE marker decides *whether* a file is late, the entry
  time *how* late: with a due date in deadlines.toml, a LATE file is at least one second past the
  due date and an unmarked one at most on it (extensions are then applied by nbgrader's lateness). nbgrader writes the
  newest time of a student's files to ``timestamp.txt``, from which autograde's late penalty is computed.

What is expected in every collect is logged as information, not as a warning (``ExpectedAsInfo``):
an older resubmission skipped (and nbgrader's own lines about that skip), and nbgrader's "Directory
not found. Creating" and "Clearing existing files" for the folders it fills; a file that is no
Canvas submission or no notebook of the assignment, or a Canvas user not on the roster, stays a
warning.

Simplified: one zip layout (Canvas's); other LMSs need their own ``named_regexp``.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import zipfile
from datetime import UTC, datetime, timedelta

from nbgrader.plugins.zipcollect import ExtractorPlugin, FileNameCollectorPlugin
from nbgrader.utils import parse_utc
from traitlets import Unicode

from instructor import deadlines, roster

CANVAS_NAME = re.compile(r"^(?P<name>[^_/]+)_(?P<late>LATE_)?(?P<lms_id>\d+)_(?P<submission_id>\d+)_(?P<file>.+)$")
RESUBMISSION = re.compile(r"^(?P<stem>.+?)(?:-(?P<dash>\d+)| \((?P<paren>\d+)\))$")


class ExpectedAsInfo(logging.Filter):
    """Log nbgrader's warnings about what every collect does as INFO: folders it creates or refills,
    and the files ``older`` (resubmissions the collector skipped on purpose)."""

    EXPECTED = ("Directory not found. Creating: ", "Clearing existing files in ")
    SKIPPED = "Skipped submission with no match information provided: "

    def __init__(self):
        super().__init__()
        self.older: set[str] = set()

    def _expected(self, message: str) -> bool:
        if message.startswith(self.EXPECTED):
            return True
        if message.startswith(self.SKIPPED):
            return message[len(self.SKIPPED):] in self.older
        counts = re.fullmatch(r"(\d+) files collected, (\d+) files skipped", message)
        return bool(counts) and int(counts[2]) == len(self.older)

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.WARNING and self._expected(record.getMessage()):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def _quiet_expected(log: logging.Logger) -> ExpectedAsInfo:
    """The filter on ``log`` (added once, shared by the extractor and the collector)."""
    found = next((f for f in log.filters if isinstance(f, ExpectedAsInfo)), None)
    if found is None:
        found = ExpectedAsInfo()
        log.addFilter(found)
    return found


def parse_canvas_name(filename: str) -> dict | None:
    """{lms_id, late, submission_id, file_id, attempt} of a Canvas download's file name, or None."""
    match = CANVAS_NAME.match(os.path.basename(filename))
    if not match:
        return None
    stem, ext = os.path.splitext(match["file"])
    attempt = 0
    resub = RESUBMISSION.match(stem)
    if resub:
        stem, attempt = resub["stem"], int(resub["dash"] or resub["paren"])
    return {"lms_id": match["lms_id"], "late": bool(match["late"]), "submission_id": match["submission_id"],
            "file_id": stem + ext, "attempt": attempt}


def release_name(filename: str, expected: set[str]) -> str | None:
    """The release notebook a submitted file stands for: its own name, or its Canvas name's file."""
    base = os.path.basename(filename)
    if base in expected:
        return base
    info = parse_canvas_name(base)
    return info["file_id"] if info and info["file_id"] in expected else None


class TimedExtractor(ExtractorPlugin):
    """nbgrader's extractor, but each file keeps its time in the zip (the submission time)."""

    zip_timezone = Unicode("UTC", help="Time zone of the times stored in the LMS's zip").tag(config=True)

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        _quiet_expected(self.log)

    def extract(self, archive_path: str, extracted_path: str) -> None:
        from dateutil import tz

        zone = tz.gettz(self.zip_timezone)
        if zone is None:
            raise ValueError(f"TimedExtractor.zip_timezone {self.zip_timezone!r} is not a time zone (e.g. 'UTC', "
                             "'Europe/Berlin')")
        for folder, _, files in os.walk(archive_path):
            for name in sorted(files):
                path = os.path.join(folder, name)
                if not zipfile.is_zipfile(path):  # a loose file: copied with its own time
                    shutil.copy2(path, os.path.join(extracted_path, name))
                    continue
                with zipfile.ZipFile(path) as archive:
                    for entry in archive.infolist():
                        base = os.path.basename(entry.filename)  # flat: no path from the zip is used
                        if entry.is_dir() or not base:
                            continue
                        dest = os.path.join(extracted_path, base)
                        with archive.open(entry) as src, open(dest, "wb") as out:
                            shutil.copyfileobj(src, out)
                        stamp = datetime(*entry.date_time, tzinfo=zone).timestamp()
                        os.utime(dest, (stamp, stamp))
                        self.log.info("Extracted %s (%s)", dest, datetime(*entry.date_time))


class CanvasCollector(FileNameCollectorPlugin):
    """nbgrader's file-name collector for Canvas downloads (see the module docstring)."""

    named_regexp = Unicode(CANVAS_NAME.pattern).tag(config=True)
    course_root = Unicode("", help="Course root: roster.csv and deadlines.toml").tag(config=True)

    _winners: dict | None = None

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._expected = _quiet_expected(self.log)

    def _choose(self) -> dict:
        """{path: collected info} of every winning file under the extracted folder."""
        app = self.parent
        extracted = app._format_collect_path(app.extracted_directory)
        assignment = app.coursedir.assignment_id
        by_lms = {row["lms_user_id"]: row["student_id"] for row in roster.load(self.course_root)}
        policy = deadlines.load(self.course_root, assignment)
        best: dict[tuple[str, str], tuple] = {}
        for folder, _, files in os.walk(extracted):
            for name in files:
                info = parse_canvas_name(name)
                if info is None or os.path.splitext(name)[1] not in self.valid_ext:
                    continue
                path = os.path.join(folder, name)
                student = by_lms.get(info["lms_id"])
                if student is not None and roster.check_id(student):  # roster.csv edited by hand
                    self.log.error("Skipped %s: the roster's student id %r %s (make roster refuses it)",
                                   name, student, roster.check_id(student))
                    continue
                if student is None:
                    self.log.warning("Canvas user %s (%s) is not on the roster (make roster): collected as %s",
                                     info["lms_id"], name, info["lms_id"])
                    student = info["lms_id"]
                when = datetime.fromtimestamp(os.path.getmtime(path), UTC).replace(tzinfo=None)
                if policy:  # Canvas says whether it is late (against the due date, not the extensions)
                    due = parse_utc(policy["due"])
                    when = max(when, due + timedelta(seconds=1)) if info["late"] else min(when, due)
                key = (student, info["file_id"])
                rank = (info["attempt"], when)
                if key in best:
                    loser = min(best[key], (rank, path))
                    self.log.info("Skipped %s: %s/%s has a newer resubmission", loser[1], *key)
                    self._expected.older.add(loser[1])
                if key not in best or (rank, path) > best[key]:
                    best[key] = (rank, path)
        return {path: {"student_id": student, "file_id": file_id, "timestamp": rank[1].isoformat(" ")}
                for (student, file_id), (rank, path) in best.items()}

    def collect(self, submitted_file: str) -> dict | None:
        if self._winners is None:
            self._winners = self._choose()
        info = self._winners.get(submitted_file)
        if info is None and parse_canvas_name(submitted_file) is None:
            self.log.warning("Not a Canvas submission file name: %s", submitted_file)
        return info

