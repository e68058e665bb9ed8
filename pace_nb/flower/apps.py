"""The app components a deployment loads (``[tool.flwr.app.components]``): settings come from
the run config, each SuperNode's partition from its ``node_config``."""
from pace_nb.flower.client import make_client_app
from pace_nb.flower.server import make_server_app

server_app = make_server_app()
client_app = make_client_app()
