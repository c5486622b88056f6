// Command guess is the small interactive program of seed 001 §8.2–§8.3:
// it asks for a number; 7 is correct (exit 0), a number outside 1–10 is
// out of range (exit 2), anything else is wrong (exit 1).
package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

func main() {
	fmt.Print("Guess a number between 1 and 10: ")
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	n, err := strconv.Atoi(strings.TrimSpace(line))
	switch {
	case err != nil || n < 1 || n > 10:
		fmt.Println("Out of range")
		os.Exit(2)
	case n == 7:
		fmt.Println("Correct!")
	default:
		fmt.Println("Wrong")
		os.Exit(1)
	}
}
