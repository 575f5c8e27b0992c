package clientlib_test

const herdChildEnv = "CLIENTLIB_HERD_CHILD"

func runHerdChild() int { return 0 }
