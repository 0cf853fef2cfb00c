"""``pktbuf fwd``: a testpmd over pktbuf ports.  The command line (:mod:`.main`), the forwarder
object (:mod:`.forwarder`), its compiled loops (:mod:`.loop`, :mod:`.distrib_loop`), statistics
(:mod:`.stats`), worker processes (:mod:`.workers`, :mod:`.workers_main`) and the distributor form
(:mod:`.distrib`)."""
