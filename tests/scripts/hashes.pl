# Hash-heavy Perl over the data file given as $ARGV[0]: counting, nested
# hashes, deletion churn, sorting.  Output is sorted, so independent of the
# hash seed.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);

my (%count, %nested, %bykey);
my $lines = 0;
open(my $fh, '<', $ARGV[0]) or die "open: $!";
while (my $line = <$fh>) {
    chomp $line;
    $lines++;
    my ($key, $num, $dec, $words) = split /\t/, $line;
    my @w = split / /, $words;
    $count{$_}++ for @w;
    $nested{ substr($key, 0, 2) }{ lc $w[0] }{ scalar @w } += $num;
    $bykey{$key} = [ $num, $dec, \@w ];
}
close $fh;

# Churn: delete a third of the keys, re-add some with longer values.
my $i = 0;
for my $k (sort keys %bykey) {
    if ($i++ % 3 == 0) {
        my $v = delete $bykey{$k};
        $bykey{"re$k"} = [ @$v, join('-', @{ $v->[2] }) x 3 ] if $i % 2;
    }
}

my $digest = Digest::MD5->new;
for my $k (sort keys %bykey) {
    my $v = $bykey{$k};
    $digest->add($k, "=", $v->[0], ",", $v->[1], ",", scalar @{ $v->[2] }, "\n");
}
print "lines $lines words ", scalar(keys %count), " keys ", scalar(keys %bykey), " md5 ", $digest->hexdigest, "\n";
for my $w (sort { $count{$b} <=> $count{$a} || $a cmp $b } keys %count) {
    next if $count{$w} < 2000;
    print "word $w $count{$w}\n";
}
for my $p (sort keys %nested) {
    my $h = $nested{$p};
    my $sum = 0;
    my $n = 0;
    for my $w (sort keys %$h) {
        for my $len (sort { $a <=> $b } keys %{ $h->{$w} }) {
            $sum += $h->{$w}{$len};
            $n++;
        }
    }
    print "prefix $p $n $sum\n";
}
my $joined = join ',', map { "$_:$count{$_}" } sort keys %count;
print "all ", md5_hex($joined), " ", length($joined), "\n";
