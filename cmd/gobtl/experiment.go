package main

import "github.com/spf13/cobra"

// experimentCmd groups the experiments of the issues: each runs a
// workload under several configurations and prints its results beside the
// papers' numbers.
var experimentCmd = &cobra.Command{
	Use:   "experiment NAME",
	Short: "run one of the papers' experiments and print the table",
}

func init() { rootCmd.AddCommand(experimentCmd) }
