"""One-shot methods as Flower apps: a ServerApp and a ClientApp, one round (optional extra ``[flower]``).

``adapters`` (a method's phases as the apps call them: PACE, SPEAR, every registered
one-shot baseline), ``client`` (the ClientApp: a data holder, its own partition only),
``server`` (the ServerApp: screens the uploads, runs the method's server phase and evaluation,
rows from the in-process builders), ``screening`` (what the server checks), ``wire`` (what
travels), ``partitions`` (one file per data holder; the evaluator's file), ``settings`` (the
run config), ``simulate`` (Flower's simulation engine), ``deploy`` (SuperLink + K SuperNodes on
127.0.0.1). See docs/FLOWER.md. Nothing else in pace_nb imports this package except the CLI.
"""
