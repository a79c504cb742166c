# lease.t's cases with LessonsDBLeasePeer on both servers (issue 56,
# docs/directives.md): every write reaches the other server, and is
# acknowledged, by datagram instead of NOTIFY; the psql write, the
# stopped server and the terminated listeners as there.
use strict;
use warnings FATAL => 'all';

use FindBin;

$ENV{LESSONS_LEASE_PEERS} = 'B C';
do "$FindBin::Bin/lease.t";
die $@ if $@;
