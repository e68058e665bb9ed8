"""Layer 5: figures (seaborn style), pure data shaping for figures, ipywidgets explorers."""
