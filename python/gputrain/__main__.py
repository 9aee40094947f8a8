"""python -m gputrain ... runs the gputrain program."""
from gputrain import main

main()
