#!/usr/bin/env python3
"""Every command the user documentation shows exists: each `gputrain` command line in the
README, docs/ and the guides beside the configs and data sets names a real command and only
options that command takes (its --help), and each `scripts/...` and `configs/...` path it names
is in the checkout. Usage: doc_commands.py GPUTRAIN_BINARY SOURCE_DIR"""
import re
import subprocess
import sys
from pathlib import Path

binary, root = sys.argv[1], Path(sys.argv[2])
documents = [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "configs" / "README.md",
             root / "datasets" / "README.md", root / "scripts" / "bench" / "README.md",
             root / "scripts" / "gpu" / "README.md"]

help_cache = {}


def help_text(words):
    """`gputrain WORDS --help`, or None when WORDS is no command."""
    key = tuple(words)
    if key not in help_cache:
        run = subprocess.run([binary, *words, "--help"], capture_output=True, text=True)
        help_cache[key] = run.stdout if run.returncode == 0 else None
    return help_cache[key]


def subcommands(text):
    """The names listed under 'Subcommands:' of a --help text."""
    names, inside = [], False
    for line in text.splitlines():
        if line.startswith("Subcommands:"):
            inside = True
        elif inside and re.match(r"^  \S", line):
            names.append(line.split()[0])
        elif inside and line and not line.startswith(" "):
            inside = False
    return names


def command_lines(text):
    """(line number, command) of each gputrain command in a fenced shell block or a code span."""
    in_block = shell = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            in_block = not in_block
            shell = in_block and line.strip() in ("```", "```sh", "```bash", "```shell")
            continue
        if in_block and not shell:
            continue
        if shell:
            code = line.split(" # ")[0].split("   #")[0]
            match = re.search(r"(?:^|\s|\$\()gputrain\s+(.*)", code)
            if match and not code.lstrip().startswith("#"):
                yield number, match.group(1)
            continue
        for span in line.split("`")[1::2]:  # the code spans
            if span.startswith("gputrain "):
                yield number, span[len("gputrain "):]


problems = []
checked = 0
for document in documents:
    text = document.read_text()
    where = document.relative_to(root)
    for number, command in command_lines(text):
        checked += 1
        command = command.strip()
        words = command.split()
        # The command's words up to its first option or argument; alternatives (a|b) each checked.
        path = []
        top = help_text([])
        choices = subcommands(top)
        while words and choices and not words[0].startswith("-"):
            wanted = [w for w in words[0].strip("[]").split("|") if w]
            missing = [w for w in wanted if w not in choices]
            if missing and path:
                break  # an argument of the command (a NAME or a path), not a subcommand
            if missing:
                problems.append(f"{where}:{number}: `gputrain {command}`: no command {', '.join(missing)}")
                break
            path.append(wanted[0])
            words = words[1:]
            choices = subcommands(help_text(path))
        if not path and not (words and words[0].startswith("-")):
            continue
        options = help_text(path) or ""
        options += help_text([]) or ""  # the program's own options (--log-level) go with any command
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", " ".join(words)):
            if not re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", options):
                problems.append(f"{where}:{number}: `gputrain {command}`: {' '.join(path)} has no option {option}")
    for number, line in enumerate(text.splitlines(), 1):
        for match in re.finditer(r"(?<![\w./-])((?:scripts|configs)/[\w./-]*\w)([-.]?[*<]|:\d)?", line):
            named, pattern_or_place = match.groups()
            if pattern_or_place:  # a file name pattern, or a path in a sample error message
                continue
            if not (root / named).exists():
                problems.append(f"{where}:{number}: names {named}, which is not in the checkout")

print(f"{checked} gputrain commands checked in {len(documents)} documents")
for problem in problems:
    print(problem)
sys.exit(1 if problems or checked == 0 else 0)
