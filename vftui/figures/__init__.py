"""Pure numbers: run statistics, eval statistics, chart series, health signals and gates, comparisons."""
