#!/usr/bin/perl
# Harness self-test server: accepts one TCP connection on PORT (all addresses) and answers
# "pong". Usage: tcp_pong.pl PORT
use strict;
use warnings;
use IO::Socket::INET;

my $port = shift or die "usage: tcp_pong.pl PORT\n";
my $server = IO::Socket::INET->new(LocalPort => $port, Listen => 1, ReuseAddr => 1)
  or die "listen on $port: $!\n";
my $client = $server->accept or die "accept: $!\n";
print "serving ", $client->peerhost, "\n";
print $client "pong\n";
close $client;
