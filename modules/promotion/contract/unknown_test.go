package contract_test

// unknownStatus is a status no revision of the contract will ever add: a test
// that needs a value the code does not know names this one, so adding a real
// status (say Paused) breaks none of them.
const unknownStatus = "NoSuchStatus"
