"""PACE and SPEAR as Flower apps: a ServerApp and a ClientApp, one round (optional extra ``[flower]``).

``client`` (the ClientApp: a data holder, its own partition only), ``server`` (the ServerApp:
parses bytes, runs the in-process server functions, builds result rows from the clients'
reports), ``wire`` (what travels), ``partitions`` (one file per data holder), ``settings``
(the run config), ``simulate`` (Flower's simulation engine), ``deploy`` (SuperLink + K
SuperNodes on 127.0.0.1). See docs/FLOWER.md. Nothing else in pace_nb imports this package
except the CLI.
"""
