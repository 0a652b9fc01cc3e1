"""The wire between a run and the views that watch it, in the standard library alone.

``wire`` frames events and control calls over ``multiprocessing`` connections; ``server`` is
the control socket every run listens on; ``client`` is a dashboard's end of that socket;
``process`` is the dashboard's handle on the collector it runs in a child process. Nothing
here imports the collector, Textual, verifiers or atroposlib.
"""
