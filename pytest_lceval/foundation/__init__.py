"""The bottom floor: what every other folder builds on; nothing here imports them.

``grid`` is what a cell is (its id, lengths, depths, case seeds), ``data`` where a cell's text
comes from, ``measurement`` what measuring a cell gives (scores, their interval, the result made
from them), ``criterion`` what judges it (a criterion, what it needs measured, a suite's verdict
policy), ``measuring`` what the thread measuring a cell carries, ``workers`` which xdist process
this is, ``answer_text`` how an answer is compared with a gold one, ``cpu_wait`` how
torch's idle CPU threads wait.
"""
