"""What a person reads: the HTML report (``page``), every table it shows and the CLI prints
(``tables``), its figures (``plots``), and asv's pages made to open offline (``publish``). It reads
records through ``ckptbench.metrics`` and never imports what runs Spark."""
