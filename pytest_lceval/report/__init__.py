"""Session-end reports: heatmaps, diagnostic plots, HTML extras, badge, summary."""
