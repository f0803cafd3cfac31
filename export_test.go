package tally

// ProcessTable is processTable, for the tests of what a claim records.
var ProcessTable = processTable
