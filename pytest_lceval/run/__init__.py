"""The run loop: a session's settings in use, the grid, selection, the plan, measuring cells
(one pipeline for every suite) and progress. It knows no benchmark."""
