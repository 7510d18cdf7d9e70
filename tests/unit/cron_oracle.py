#!/usr/bin/python3
"""Differential oracles for baton's cron trigger (used by tests/unit/cron_differential_test.cpp).

Usage: /usr/bin/python3 cron_oracle.py INPUT OUTPUT COUNT

INPUT has one case per line, "<start>\t<cron expression>", the start in RFC 3339 UTC with whole
seconds, the expression in baton's syntax (5 fields, or 6 with seconds FIRST). For each case
OUTPUT gets one line with up to COUNT fire times after the start, as UTC "YYYY-MM-DDTHH:MM:SSZ"
separated by spaces, followed by "END" if croniter found no further fire time, or
"ERROR <message>" if croniter rejected the expression. The first OUTPUT line is a header naming
croniter's version; all cases run in this one process.

croniter's day rule and DST handling are not ISC cron's, so the test only sends expressions where
croniter's policy agrees with ISC's, in UTC; the ISC rules themselves are checked against
tests/unit/cron_isc_reference.hpp.
Needs Debian's python3-croniter (run with /usr/bin/python3; other interpreters may lack it).
"""
import datetime
import importlib.metadata
import sys

from croniter import croniter, CroniterBadCronError, CroniterBadDateError


def to_croniter_syntax(expr):
    """baton puts seconds first in the 6-field form; croniter puts them last."""
    fields = expr.split()
    if len(fields) == 6:
        fields = fields[1:] + fields[:1]
    return " ".join(fields)


def fire_times(expr, start, count):
    it = croniter(to_croniter_syntax(expr), start, ret_type=datetime.datetime)
    out = []
    try:
        for _ in range(count):
            out.append(it.get_next(datetime.datetime).strftime("%Y-%m-%dT%H:%M:%SZ"))
    except CroniterBadDateError:
        out.append("END")
    return " ".join(out)


def main():
    if len(sys.argv) != 4:
        sys.exit("usage: cron_oracle.py INPUT OUTPUT COUNT")
    count = int(sys.argv[3])
    lines = []
    with open(sys.argv[1], encoding="utf-8") as f:
        for raw in f:
            raw = raw.rstrip("\n")
            if not raw:
                continue
            start_text, expr = raw.split("\t", 1)
            start = datetime.datetime.strptime(start_text, "%Y-%m-%dT%H:%M:%SZ")
            try:
                lines.append(fire_times(expr, start, count))
            except (CroniterBadCronError, ValueError) as e:
                lines.append("ERROR " + str(e).replace("\n", " "))
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        f.write("# croniter %s\n" % importlib.metadata.version("croniter"))
        for line in lines:
            f.write(line + "\n")


if __name__ == "__main__":
    main()
