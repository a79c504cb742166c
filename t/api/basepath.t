# Base paths (issue 11 item 3): a Location header is always one absolute
# path.  LessonsBasePath loses a trailing slash (it used to answer
# Location: /api/lessons//1); a regex section names its base explicitly;
# a second <Location> mount defaults to its own path (see merge.t).
use strict;
use warnings FATAL => 'all';

use FindBin;
use lib "$FindBin::Bin/../lib";
use Apache::Test qw(-withtestmore);
use LessonsTest;

for my $base ('/trail/api/lessons', '/rx/api/lessons', '/api/lessons') {
    my $res = call(POST => $base, json => { levelId => 3, title => "Basis $base", order => 1 });
    is $res->code, 201, "POST $base: 201";
    my $loc = $res->header('Location') // '';
    like $loc, qr{\A\Q$base\E/\d+\z}, "POST $base: Location $loc is base/id";
    unlike $loc, qr{//}, "POST $base: no double slash";
    my ($id) = $loc =~ m{/(\d+)\z};
    is call(GET => "$base/$id")->code, 200, "GET $base/$id: 200";
    is call(GET => "$base/")->code, 200, "GET $base/ (one trailing slash): 200";
}

done_testing;
