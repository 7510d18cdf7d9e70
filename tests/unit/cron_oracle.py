#!/usr/bin/python3
"""Differential oracles for baton's cron trigger (used by tests/unit/cron_differential_test.cpp).

Usage: /usr/bin/python3 cron_oracle.py INPUT OUTPUT COUNT
       /usr/bin/python3 cron_oracle.py --dst INPUT OUTPUT

Default mode, croniter: INPUT has one case per line, "<start>\t<cron expression>", the start in
RFC 3339 UTC with whole seconds, the expression in baton's syntax (5 fields, or 6 with seconds
FIRST). For each case OUTPUT gets one line with up to COUNT fire times after the start, as UTC
"YYYY-MM-DDTHH:MM:SSZ" separated by spaces, followed by "END" if croniter found no further fire
time, or "ERROR <message>" if croniter rejected the expression.

--dst mode, brute force: INPUT lines are "<zone>\t<start>\t<end>\t<5-field expression>". OUTPUT
gets, per case, every fire time in (start, end] under baton's documented DST rule, found by
walking real UTC minutes with Python's zoneinfo (an independent time zone implementation):
  - a minute whose wall clock shows a time for the first time fires if that time matches;
  - the first minute after a forward jump also fires if any skipped wall-clock time matches;
  - a minute whose wall clock repeats an earlier time fires only if the hour field is
    unrestricted (croniter's expansion is '*') and the time matches.
Matching uses croniter's field expansion and the documented day rule (both day fields
restricted: either may match). Only modern zones with whole-minute offsets are used.

The first OUTPUT line is a header naming croniter's version; all cases run in this one process.
Needs Debian's python3-croniter (run with /usr/bin/python3; other interpreters may lack it).
"""
import datetime
import importlib.metadata
import sys
import zoneinfo

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


def parse_utc(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=datetime.timezone.utc)


def dst_fire_times(zone_name, start, end, expr):
    zone = zoneinfo.ZoneInfo(zone_name)
    (minutes, hours, doms, months, dows), _ = croniter.expand(expr)

    def full(values):
        return values == ["*"]

    def matches(local):
        if not full(minutes) and local.minute not in minutes:
            return False
        if not full(hours) and local.hour not in hours:
            return False
        if not full(months) and local.month not in months:
            return False
        dom = full(doms) or local.day in doms
        dow = full(dows) or local.isoweekday() % 7 in dows
        if not full(doms) and not full(dows):
            return dom or dow
        return dom and dow

    minute = datetime.timedelta(minutes=1)
    # Walk from 6 hours before the start (longer than any repeat) so that the wall clock's
    # running maximum at the start is known.
    t = start.replace(second=0) - datetime.timedelta(hours=6)
    latest_shown = None
    previous = None
    out = []
    while t <= end:
        local = t.astimezone(zone).replace(tzinfo=None)
        fire = False
        if latest_shown is None or local > latest_shown:
            fire = matches(local)
            if not fire and previous is not None and local - previous > minute:
                skipped = previous + minute
                while skipped < local and not fire:
                    fire = matches(skipped)
                    skipped += minute
        elif full(hours):
            fire = matches(local)
        if fire and t > start:
            out.append(t.strftime("%Y-%m-%dT%H:%M:%SZ"))
        latest_shown = local if latest_shown is None else max(latest_shown, local)
        previous = local
        t += minute
    return " ".join(out)


def dst_main(input_path, output_path):
    lines = []
    with open(input_path, encoding="utf-8") as f:
        for raw in f:
            raw = raw.rstrip("\n")
            if not raw:
                continue
            zone_name, start_text, end_text, expr = raw.split("\t", 3)
            lines.append(dst_fire_times(zone_name, parse_utc(start_text), parse_utc(end_text), expr))
    with open(output_path, "w", encoding="utf-8") as f:
        f.write("# croniter %s, brute force\n" % importlib.metadata.version("croniter"))
        for line in lines:
            f.write(line + "\n")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--dst":
        dst_main(sys.argv[2], sys.argv[3])
        return
    if len(sys.argv) != 4:
        sys.exit("usage: cron_oracle.py INPUT OUTPUT COUNT | cron_oracle.py --dst INPUT OUTPUT")
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
